from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        # Imported here, not at the top: this module loads before the models do.
        from scheduling import claims, queue, rules  # noqa: F401 (rules registers)
        from scheduling.quiet import quiet_start_refusal
        from workspaces import hooks

        # Workspaces sit below: they tell of every status change, from which the queue learns
        # that GPUs were freed (a pass is due) and that an admitted workspace runs (its claim
        # window opens).
        hooks.on_transition(queue.queue_pass_when_freed)
        hooks.on_transition(claims.claim_window_open)
        # A start Azure refused for lack of room waits a while before it is tried again.
        hooks.on_transition(queue.queue_retry_later)
        # A person's Start is held by the team's quiet hours as the queue's starts are.
        hooks.provide_start_held(quiet_start_refusal)

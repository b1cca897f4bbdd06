from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = "Storage"

    def ready(self) -> None:
        # Workspaces sit below storage and import none of it: storage tells a VM's cloud-init
        # which shares and home to mount through the hook workspaces asks (workspaces.hooks).
        # Imported here, not at the top: this module loads before the models do.
        from storage.mounts import mount_options, mounts_shown, workspace_mounts
        from workspaces import hooks

        hooks.provide_mounts(workspace_mounts, mounts_shown, mount_options)

"""The embedded broker: a worker reading while messages are published never sees half of one."""

import threading

from kombu import Connection

from portal.kombu_filesystem import Transport

TRANSPORT = Transport


def _connection(folder):
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    options.update(processed_folder=str(folder / "done"), control_folder=str(folder / "control"))
    options["store_processed"] = False
    for sub in ("done", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return Connection("filesystem://", transport=TRANSPORT, transport_options=options)


def test_a_reader_racing_the_writer_gets_every_message_whole(tmp_path):
    inbox = tmp_path / "out"
    inbox.mkdir()
    sent, received, errors = 400, [], []

    def read():
        with _connection(inbox) as conn:
            queue = conn.SimpleQueue("tasks")
            while len(received) < sent:
                try:
                    received.append(queue.get(timeout=5).payload)
                except Exception as exc:  # a torn message raised JSONDecodeError here before
                    errors.append(exc)
                    return

    writer = _connection(inbox)
    queue = writer.SimpleQueue("tasks")  # bound before anything is sent, as a worker would be
    reader = threading.Thread(target=read)
    reader.start()
    with writer:
        for n in range(sent):
            queue.put({"n": n, "pad": "x" * 4096})
    reader.join(timeout=60)

    assert errors == []
    assert sorted(m["n"] for m in received) == list(range(sent))


def test_filesystem_urls_use_it_and_redis_urls_do_not():
    from portal.celery import app

    with app.connection_for_write("filesystem://") as conn:
        assert isinstance(conn.transport, Transport)
    with app.connection_for_write("redis://127.0.0.1:6379/0") as conn:
        assert not isinstance(conn.transport, Transport)

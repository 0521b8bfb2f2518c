"""The embedded store: atomic files, locks, schema versions, damaged files, hostile ids."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from belt.errors import Conflict, ExitCode, InvalidInput, NotFound
from belt.store import SCHEMA_VERSION, MemoryStore, Store, files, open_store, shapes
from belt.store import store as store_module
from belt.store.locking import LOCKS_KEPT
from belt.store.store import FRESH_KEPT


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """The file store; with ``@both``, the memory store too."""
    if getattr(request, "param", "file") == "memory":
        return MemoryStore()
    return Store(tmp_path / "store")


both = pytest.mark.parametrize("store", ["file", "memory"], indirect=True)
"""Run a test of the store's rules against both stores."""


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def contents(store: Store) -> dict[str, bytes]:
    """Every file of either store (lock files aside), by its path."""
    if isinstance(store, MemoryStore):
        return store.snapshot()
    found = {str(store.root / name): data for name, data in snapshot(store.root).items()}
    return {name: data for name, data in found.items() if "/locks/" not in name}


def test_open_store_lives_under_belt_home(belt_home: Path) -> None:
    store = open_store()
    store.create("run", "run_1", {"state": "working"})
    assert store.root == belt_home / "store"
    assert (belt_home / "store" / "objects" / "run" / "run_1.json").is_file()


@both
def test_objects_round_trip_inside_a_versioned_envelope(store: Store) -> None:
    store.create("interrupt", "int_1", {"status": "pending", "n": [1, 2]})
    assert store.read("interrupt", "int_1") == {"status": "pending", "n": [1, 2]}
    assert store.get("interrupt", "int_1") == {"status": "pending", "n": [1, 2]}
    assert store.exists("interrupt", "int_1")
    on_disk = json.loads(contents(store)[str(store.path("interrupt", "int_1"))])
    assert on_disk == {
        "belt": "object",
        "schema": SCHEMA_VERSION,
        "kind": "interrupt",
        "id": "int_1",
        "data": {"status": "pending", "n": [1, 2]},
    }


def test_object_files_are_private(store: Store) -> None:
    store.create("interrupt", "int_1", {"status": "pending", "n": [1, 2]})
    assert oct(store.path("interrupt", "int_1").stat().st_mode & 0o777) == oct(0o600)


@both
def test_missing_objects(store: Store) -> None:
    assert store.get("run", "nope") is None
    assert not store.exists("run", "nope")
    with pytest.raises(NotFound) as caught:
        store.read("run", "nope")
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    with pytest.raises(NotFound):
        store.update("run", "nope", lambda d: d)
    assert contents(store) == {}


def test_a_missing_object_leaves_no_lock_file(store: Store) -> None:
    with pytest.raises(NotFound):
        store.update("run", "nope", lambda d: d)
    assert not (store.root / "locks").exists()


@both
def test_create_refuses_an_existing_id_and_leaves_it(store: Store) -> None:
    store.create("chat", "ch_1", {"v": 1})
    before = contents(store)
    with pytest.raises(Conflict) as caught:
        store.create("chat", "ch_1", {"v": 2})
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert contents(store) == before


@both
def test_write_creates_and_replaces(store: Store) -> None:
    store.write("agent", "ag_1", {"v": 1})
    store.write("agent", "ag_1", {"v": 2})
    assert store.read("agent", "ag_1") == {"v": 2}
    assert store.list_ids("agent") == ["ag_1"]


@both
def test_update_writes_what_fn_returns(store: Store) -> None:
    store.create("run", "r", {"n": 1, "deep": {"a": 1}})
    result = store.update("run", "r", lambda d: {**d, "n": d["n"] + 1})
    assert result == {"n": 2, "deep": {"a": 1}}
    assert store.read("run", "r") == result


@both
def test_update_writes_nothing_when_fn_raises(store: Store) -> None:
    store.create("run", "r", {"n": 1, "deep": {"a": 1}})
    before = contents(store)

    def broken(data: dict) -> dict:
        data["deep"]["a"] = 99  # mutates the copy it was given, then fails
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.update("run", "r", broken)
    assert store.read("run", "r") == {"n": 1, "deep": {"a": 1}}
    assert contents(store) == before


def test_list_ids_skips_temporary_files(store: Store) -> None:
    for name in ("b", "a", "c"):
        store.create("message", name, {})
    (store.root / "objects" / "message" / ".a.json.x1.tmp").write_text("{")
    assert store.list_ids("message") == ["a", "b", "c"]
    assert store.list_ids("nothing") == []


def test_a_write_passes_over_a_temporary_name_that_exists_and_leaves_nothing_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "objects" / "run" / "r.json"
    target.parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    numbers = iter(range(10**6))
    monkeypatch.setattr(files, "_temp_numbers", numbers)
    taken = f".r.json.{os.getpid()}-{threading.get_ident()}-"
    # The next two names are taken: a file a dead process left, and a link to a file outside.
    (target.parent / f"{taken}0.tmp").write_bytes(b"left behind")
    (target.parent / f"{taken}1.tmp").symlink_to(outside)
    files.atomic_write(target, b"{}", fsync=False)
    assert target.read_bytes() == b"{}"
    assert outside.read_bytes() == b"untouched"
    assert (target.stat().st_mode & 0o777) == 0o600
    assert sorted(path.name for path in target.parent.iterdir()) == sorted(
        ["r.json", f"{taken}0.tmp", f"{taken}1.tmp"]
    )


def test_writes_from_many_threads_at_once_each_make_a_file_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.json"
    made: list[str] = []
    real = files._new_temp_file

    def recorded(path: Path) -> tuple[int, str]:
        found = real(path)
        made.append(found[1])
        return found

    monkeypatch.setattr(files, "_new_temp_file", recorded)

    def write(n: int) -> None:
        for _ in range(50):
            files.atomic_write(target, b"%d" % n, fsync=False)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == len(set(made)) == 400
    assert target.read_bytes() in {b"%d" % n for n in range(8)}
    assert [path.name for path in tmp_path.iterdir()] == ["r.json"]


@both
def test_links_keep_order_and_are_idempotent(store: Store) -> None:
    for member in ("m3", "m1", "m2", "m1"):
        store.link("chat-messages", "ch_1", member)
    assert store.members("chat-messages", "ch_1") == ["m3", "m1", "m2"]
    store.unlink("chat-messages", "ch_1", "m1")
    store.unlink("chat-messages", "ch_1", "m1")
    assert store.members("chat-messages", "ch_1") == ["m3", "m2"]
    store.link("chat-messages", "ch_1", "m1")
    assert store.members("chat-messages", "ch_1") == ["m3", "m2", "m1"]
    assert store.members("chat-messages", "ch_2") == []


@both
def test_logs_append_in_order(store: Store) -> None:
    for i in range(3):
        store.append("events", "run_1", {"i": i})
    assert store.read_log("events", "run_1") == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert store.read_log("events", "run_2") == []
    (log,) = [v for k, v in contents(store).items() if k.endswith("/logs/events/run_1.jsonl")]
    first = log.splitlines()[0]
    assert json.loads(first) == {"belt": "log", "schema": SCHEMA_VERSION}


def test_records_are_written_as_the_standard_librarys_compact_json(store: Store) -> None:
    # The bytes any belt reads back: one line of compact UTF-8 JSON per record, as json.dumps
    # writes it, whatever the encoder.
    record = {
        "text": 'é ✓ \u2028 \x00\x1f\x7f "q" \\ \n',
        "numbers": [0, -1, 2**70, 0.5, 1e20, -2.25],
        "nested": {"a": [True, False, None, {}], "b": []},
    }
    store.append("journal", "serve", record)
    store.write("runs", "r_1", record)
    compact = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    line = (store.root / "logs" / "journal" / "serve.jsonl").read_bytes().splitlines()[1]
    assert line == compact
    assert (
        (store.root / "objects" / "runs" / "r_1.json")
        .read_bytes()
        .endswith(b'"data":' + compact + b"}\n")
    )
    assert store.read_log("journal", "serve") == [record]
    assert store.read("runs", "r_1") == record


def test_a_torn_last_line_is_skipped_and_cut_by_the_next_append(store: Store) -> None:
    store.append("journal", "serve", {"i": 0})
    path = store.root / "logs" / "journal" / "serve.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"i": 1, "pad": "xx')  # a writer killed mid-line
    assert store.read_log("journal", "serve") == [{"i": 0}]
    store.append("journal", "serve", {"i": 2})
    assert store.read_log("journal", "serve") == [{"i": 0}, {"i": 2}]
    assert path.read_bytes().endswith(b'{"i":2}\n')


@both
def test_tags(store: Store) -> None:
    store.tag("pending-interrupts", "002-b")
    store.tag("pending-interrupts", "001-a")
    store.tag("pending-interrupts", "001-a")
    assert store.tagged("pending-interrupts") == ["001-a", "002-b"]
    store.untag("pending-interrupts", "001-a")
    store.untag("pending-interrupts", "001-a")
    assert store.tagged("pending-interrupts") == ["002-b"]
    assert store.tagged("other") == []


@both
def test_lock_is_reentrant_in_one_thread(store: Store) -> None:
    store.create("run", "r", {"n": 0})
    with store.lock("run", "r"), store.lock("run", "r"):
        store.update("run", "r", lambda d: {"n": d["n"] + 1})
    assert store.read("run", "r") == {"n": 1}


def test_threads_with_their_own_store_never_lose_an_update(tmp_path: Path) -> None:
    Store(tmp_path / "s").create("counter", "c", {"n": 0})
    barrier = threading.Barrier(8)

    def bump() -> None:
        mine = Store(tmp_path / "s", fsync=False)
        barrier.wait()
        for _ in range(25):
            mine.update("counter", "c", lambda d: {"n": d["n"] + 1})

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Store(tmp_path / "s").read("counter", "c") == {"n": 200}


def test_threads_sharing_a_memory_store_never_lose_an_update() -> None:
    store = MemoryStore()
    store.create("counter", "c", {"n": 0})
    barrier = threading.Barrier(8)

    def bump() -> None:
        barrier.wait()
        for _ in range(25):
            with store.lock("counter", "c"):  # re-entrant: update takes it again
                store.update("counter", "c", lambda d: {"n": d["n"] + 1})
            store.append("events", "r", {"n": 1})
            store.link("index", "r", f"m{threading.get_ident()}")

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.read("counter", "c") == {"n": 200}
    assert len(store.read_log("events", "r")) == 200
    assert len(store.members("index", "r")) == 8


def test_a_memory_store_keeps_its_private_part_apart_and_writes_no_file(tmp_path: Path) -> None:
    store = MemoryStore(shapes=True)
    store.write_private("hooks", "sim_1", {"hooks": [], "url": "http://user:pw@host/"})
    assert store.read_private("hooks", "sim_1")["url"] == "http://user:pw@host/"
    assert store.get("hooks", "sim_1") is None
    assert store.list_ids("hooks") == []
    assert str(store.private_path("hooks", "sim_1")) == "memory:/private/hooks/sim_1.json"
    # without_fsync is the same store, not a copy of it.
    store.without_fsync().create("run", "r", {"id": "r", "state": "working"})
    assert store.read("run", "r")["state"] == "working"
    # The scratch directory for derived files is made only when asked for, and removed.
    assert store._scratch is None
    scratch = store.root
    assert scratch.is_dir() and store.root == scratch
    store.close()
    assert not scratch.exists()
    assert store.read("run", "r")["state"] == "working"


@both
def test_a_record_of_the_wrong_shape_is_refused_by_both_stores(
    store: Store, tmp_path: Path
) -> None:
    from belt.records import runs

    assert shapes.RECORDS["run"] is runs.Run
    checked = (
        MemoryStore(shapes=True)
        if isinstance(store, MemoryStore)
        else Store(tmp_path / "checked", shapes=True)
    )
    checked.create("run", "r", {"id": "r", "state": 3})
    with pytest.raises(InvalidInput) as caught:
        checked.read("run", "r")
    path = str(checked.path("run", "r"))
    assert caught.value.message == (
        f"{path}: damaged store file: it is not a run record: its state is not a string"
    )
    before = contents(checked)
    with pytest.raises(InvalidInput):
        checked.write("run", "r", {"id": "r", "state": "working"})
    assert contents(checked) == before


BUMPER = """
import sys
from pathlib import Path
from belt.store import Store
store = Store(Path(sys.argv[1]), fsync=False)
for _ in range(int(sys.argv[2])):
    store.update("counter", "c", lambda d: {"n": d["n"] + 1})
    store.link("run-interrupts", "r", f"m{sys.argv[3]}")
    store.append("events", "r", {"who": sys.argv[3]})
"""


def test_processes_never_lose_an_update(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store(root).create("counter", "c", {"n": 0})
    procs = [
        subprocess.Popen([sys.executable, "-c", BUMPER, str(root), "40", str(i)]) for i in range(4)
    ]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0, 0, 0]
    store = Store(root)
    assert store.read("counter", "c") == {"n": 160}
    assert sorted(store.members("run-interrupts", "r")) == ["m0", "m1", "m2", "m3"]
    events = store.read_log("events", "r")
    assert len(events) == 160
    assert sorted({e["who"] for e in events}) == ["0", "1", "2", "3"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_process_keeps_each_lock_file_open_a_bounded_number(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    lock_file = f"{store.root}/locks/objects/run/r.lock"

    def kept() -> list[str]:
        return [fd for fd in os.listdir("/proc/self/fd") if target(fd) == lock_file]

    with store.lock("run", "r"):
        pass
    opened = kept()
    assert len(opened) == 1
    # Taken again with a flock, through the descriptor kept open, not opened again.
    with store.lock("run", "r"):
        assert kept() == opened
    for number in range(LOCKS_KEPT + 10):
        with store.lock("run", f"r{number}"):
            pass
    assert 1 <= lock_files_open(store.root) <= LOCKS_KEPT


LOCK_HOLDER = """
import sys
from pathlib import Path
from belt.store import Store
with Store(Path(sys.argv[1])).lock("run", "r"):
    with open(sys.argv[2], "a") as out:
        out.write("held\\n")
    print("held", flush=True)
    sys.stdin.readline()
    with open(sys.argv[2], "a") as out:
        out.write("released\\n")
"""


def test_a_lock_file_deleted_since_this_process_opened_it_still_excludes_others(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s")
    with store.lock("run", "r"):
        pass  # its lock file is kept open
    next((store.root / "locks").rglob("r.lock")).unlink()
    order = tmp_path / "order"
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(store.root), str(order)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline() == "held\n"  # on the lock file it made anew

    def take() -> None:
        with store.lock("run", "r"), order.open("a") as out:
            out.write("taken here\n")

    taker = threading.Thread(target=take)
    taker.start()
    time.sleep(0.3)  # time enough to take a lock that excluded no one
    holder.stdin.write("\n")
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0
    holder.stdout.close()
    taker.join(timeout=30)
    assert order.read_text().splitlines() == ["held", "released", "taken here"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_forked_child_does_not_share_its_parents_lock(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    with store.lock("run", "r"):
        pass  # its lock file is kept open, and a child inherits the descriptor
    order = tmp_path / "order"
    ready, go = os.pipe()
    with store.lock("run", "r"):
        child = os.fork()
        if child == 0:
            code = 1
            try:
                os.close(go)
                os.read(ready, 1)
                with Store(tmp_path / "s").lock("run", "r"), order.open("a") as out:
                    out.write("child\n")
                code = 0
            finally:
                os._exit(code)
        os.close(ready)
        os.write(go, b"x")
        time.sleep(0.3)  # time enough for the child to take a lock it shared with this process
        with order.open("a") as out:
            out.write("parent\n")
    os.close(go)
    assert os.waitpid(child, 0)[1] == 0
    assert order.read_text().splitlines() == ["parent", "child"]


WRITER = """
import sys
from pathlib import Path
from belt.store import Store
store = Store(Path(sys.argv[1]))
pad = "x" * 1_000_000
if not store.exists("counter", "c"):
    store.create("counter", "c", {"n": 0})
i = store.read("counter", "c")["n"]
print("ready", flush=True)
while True:
    store.write("thing", f"t{i}", {"i": i, "pad": pad})
    store.update("counter", "c", lambda d: {"n": d["n"] + 1, "pad": pad})
    store.append("events", "run", {"i": i, "pad": pad[:1000]})
    store.link("index", "run", f"t{i}")
    print(f"ack {i}", flush=True)
    i += 1
"""


def test_writers_killed_mid_write_lose_no_acknowledged_write(tmp_path: Path) -> None:
    root = tmp_path / "s"
    acked: list[int] = []
    chance = random.Random(7)
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(chance.randint(1, 4)):
            acked.append(int(proc.stdout.readline().split()[1]))
        # Kill at an arbitrary point of the next iteration, most of which is writing files.
        time.sleep(chance.uniform(0, 0.03))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL

        store = Store(root)
        for i in acked:
            assert store.read("thing", f"t{i}")["i"] == i
        for thing in store.list_ids("thing"):  # every object there is whole, acked or not
            assert len(store.read("thing", thing)["pad"]) == 1_000_000
        counter = store.read("counter", "c")
        assert counter["n"] >= acked[-1] + 1
        assert len(counter["pad"]) == 1_000_000
        logged = [event["i"] for event in store.read_log("events", "run")]
        assert logged == sorted(set(logged))
        assert set(acked) <= set(logged)
        assert set(store.members("index", "run")) >= {f"t{i}" for i in acked}


DAMAGE = {
    "empty": b"",
    "blank": b"  \n",
    "truncated": b'{"belt": "object", "schema": 1, "kind": "interrupt", "id": "int_1", "da',
    "not json": b"hello, world\n",
    "binary": b"\x00\xff\xfe\x01garbage",
    "a list": b"[1, 2, 3]\n",
    "no envelope": b'{"status": "pending"}\n',
    "data not an object": b'{"belt": "object", "schema": 1, "kind": "interrupt", "id": "int_1", '
    b'"data": [1]}\n',
    "another object": b'{"belt": "object", "schema": 1, "kind": "interrupt", "id": "int_2", '
    b'"data": {}}\n',
    "schema not a number": b'{"belt": "object", "schema": "1", "kind": "interrupt", '
    b'"id": "int_1", "data": {}}\n',
    "no schema": b'{"belt": "object", "kind": "interrupt", "id": "int_1", "data": {}}\n',
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_object_is_reported_with_its_path_and_never_touched(
    store: Store, damage: bytes
) -> None:
    store.create("interrupt", "int_1", {"status": "pending"})
    path = store.path("interrupt", "int_1")
    path.write_bytes(damage)
    for attempt in (
        lambda: store.read("interrupt", "int_1"),
        lambda: store.get("interrupt", "int_1"),
        lambda: store.update("interrupt", "int_1", lambda d: {"status": "resolved"}),
        lambda: store.write("interrupt", "int_1", {"status": "resolved"}),
    ):
        with pytest.raises(InvalidInput) as caught:
            attempt()
        assert caught.value.exit_code == ExitCode.INVALID_INPUT
        assert str(path) in caught.value.message
        assert "damaged" in caught.value.message
        assert path.read_bytes() == damage
    with pytest.raises(Conflict):
        store.create("interrupt", "int_1", {})
    assert path.read_bytes() == damage
    assert store.list_ids("interrupt") == ["int_1"]


LINE_DAMAGE = {
    "empty": b"",
    "no header": b'{"add": "m1"}\n',
    "garbage line": b'{"belt": "index", "schema": 1}\nnot json\n{"add": "m1"}\n',
    "not an object": b'{"belt": "index", "schema": 1}\n[1]\n',
    "neither add nor remove": b'{"belt": "index", "schema": 1}\n{"x": 1}\n',
    "only a torn line": b'{"belt": "ind',
}


@pytest.mark.parametrize("kind", LINE_DAMAGE)
def test_a_damaged_index_is_reported_and_never_rewritten(store: Store, kind: str) -> None:
    damage = LINE_DAMAGE[kind]
    store.link("run-interrupts", "r", "m0")
    path = store.root / "index" / "run-interrupts" / "r.jsonl"
    path.write_bytes(damage)
    for attempt in (
        lambda: store.members("run-interrupts", "r"),
        lambda: store.unlink("run-interrupts", "r", "m0"),
    ):
        with pytest.raises(InvalidInput) as caught:
            attempt()
        assert str(path) in caught.value.message
        assert path.read_bytes() == damage
    # link appends one line without reading the index (its cost must not grow with it), so it
    # refuses a file whose header is damaged and otherwise only ever adds after what is there.
    if kind in ("empty", "no header", "only a torn line"):
        with pytest.raises(InvalidInput):
            store.link("run-interrupts", "r", "m9")
        assert path.read_bytes() == damage
    else:
        store.link("run-interrupts", "r", "m9")
        assert path.read_bytes().startswith(damage)
        with pytest.raises(InvalidInput):
            store.members("run-interrupts", "r")


def test_a_damaged_log_is_reported_and_never_appended_to(store: Store) -> None:
    store.append("events", "r", {"i": 0})
    path = store.root / "logs" / "events" / "r.jsonl"
    damage = b'{"belt": "log", "schema": 1}\n{"i": 0}\n{broken\n'
    path.write_bytes(damage)
    with pytest.raises(InvalidInput, match="line 3"):
        store.read_log("events", "r")
    path.write_bytes(b"no header at all\n")
    with pytest.raises(InvalidInput) as caught:
        store.append("events", "r", {"i": 1})
    assert str(path) in caught.value.message
    assert path.read_bytes() == b"no header at all\n"


def test_an_older_schema_is_migrated_on_read(tmp_path: Path) -> None:
    old = Store(tmp_path / "s")
    old.create("interrupt", "int_1", {"state": "open"})
    old.append("events", "r", {"kind": "x"})
    written = old.path("interrupt", "int_1").read_bytes()

    def rename_state(data: dict) -> dict:
        return {"status": {"open": "pending"}[data.pop("state")], **data}

    newer = Store(
        tmp_path / "s",
        schema=2,
        migrations={
            ("interrupt", 1): rename_state,
            ("log:events", 1): lambda r: {"type": r["kind"]},
        },
    )
    assert newer.read("interrupt", "int_1") == {"status": "pending"}
    assert newer.read_log("events", "r") == [{"type": "x"}]
    assert newer.path("interrupt", "int_1").read_bytes() == written  # reading never rewrites
    newer.update("interrupt", "int_1", lambda d: d)
    assert json.loads(newer.path("interrupt", "int_1").read_text())["schema"] == 2


def test_an_older_schema_without_a_migration_is_reported(tmp_path: Path) -> None:
    Store(tmp_path / "s").create("run", "r", {})
    with pytest.raises(InvalidInput, match="no migration of run from schema 1"):
        Store(tmp_path / "s", schema=2, migrations={}).read("run", "r")


def test_a_newer_schema_is_refused_and_never_replaced(tmp_path: Path) -> None:
    Store(tmp_path / "s", schema=SCHEMA_VERSION + 1).create("run", "r", {"future": True})
    Store(tmp_path / "s", schema=SCHEMA_VERSION + 1).append("events", "r", {"future": True})
    store = Store(tmp_path / "s")
    path = store.path("run", "r")
    before = path.read_bytes()
    for attempt in (
        lambda: store.read("run", "r"),
        lambda: store.write("run", "r", {}),
        lambda: store.update("run", "r", lambda d: d),
        lambda: store.read_log("events", "r"),
        lambda: store.append("events", "r", {}),
    ):
        with pytest.raises(InvalidInput, match="newer belt") as caught:
            attempt()
        assert caught.value.hint and "upgrade belt" in caught.value.hint
    assert path.read_bytes() == before


HOSTILE = [
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "a/b",
    "/abs",
    "a\\b",
    "x.json",
    "a b",
    "run\n",
    "nul\x00",
    "é",
    "a" * 129,
]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_refused_before_they_touch_a_file(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "deep" / "store"
    store = Store(root)
    attempts = [
        lambda: store.read("run", bad),
        lambda: store.get("run", bad),
        lambda: store.exists("run", bad),
        lambda: store.create("run", bad, {}),
        lambda: store.write("run", bad, {}),
        lambda: store.update("run", bad, lambda d: d),
        lambda: store.create(bad, "ok", {}),
        lambda: store.list_ids(bad),
        lambda: store.link("run-interrupts", bad, "ok"),
        lambda: store.link("run-interrupts", "ok", bad),
        lambda: store.link(bad, "ok", "ok"),
        lambda: store.members("run-interrupts", bad),
        lambda: store.append("events", bad, {}),
        lambda: store.append(bad, "ok", {}),
        lambda: store.read_log("events", bad),
        lambda: store.tag("pending", bad),
        lambda: store.lock("run", bad).__enter__(),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidInput) as caught:
            attempt()
        assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert list(tmp_path.rglob("*")) == []


@pytest.mark.parametrize("bad", HOSTILE[:6])
def test_a_memory_store_refuses_hostile_ids_too(bad: str) -> None:
    store = MemoryStore()
    for attempt in (
        lambda: store.create("run", bad, {}),
        lambda: store.link("run-interrupts", "ok", bad),
        lambda: store.append("events", bad, {}),
        lambda: store.tag("pending", bad),
        lambda: store.write_private(bad, "x", {}),
    ):
        with pytest.raises(InvalidInput):
            attempt()
    assert store.snapshot() == {}


@both
def test_the_longest_allowed_id_works(store: Store) -> None:
    name = "A-z_9" + "a" * 123
    store.create("run", name, {"ok": True})
    assert store.read("run", name) == {"ok": True}


def test_files_and_directories_are_private(store: Store) -> None:
    store.create("run", "r", {})
    store.append("events", "r", {})
    for path in store.root.rglob("*"):
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), path
    assert os.stat(store.root).st_mode & 0o077 == 0


# What is at a store file's name is not trusted: links, FIFOs, devices, directories, sizes


def finishes(attempt: Callable[[], object]) -> BaseException | None:
    """Run ``attempt`` in a thread and wait for it to end (a FIFO opened for reading would
    block it for good); the exception it raised, or None."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            attempt()
        except BaseException as exc:
            raised.append(exc)
        else:
            raised.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the store waited on what is at the file's name"
    return raised[0]


def put_in_place(path: Path, what: str, outside: Path) -> None:
    """Replace the file at ``path`` by ``what``."""
    path.unlink()
    if what == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif what == "link outside the store":
        path.symlink_to(outside)
    elif what == "dangling link":
        path.symlink_to(outside.parent / "nothing" / "there.json")
    elif what == "FIFO":
        os.mkfifo(path)
    else:
        path.mkdir()


UNSAFE = ["link to /dev/zero", "link outside the store", "dangling link", "FIFO", "directory"]


def store_files(store: Store) -> dict[str, tuple[Path, list[Callable[[], object]]]]:
    """Each kind of store file, made, with what reads or writes it."""
    store.create("interrupt", "int_1", {"id": "int_1", "status": "pending", "run_id": "r"})
    store.write_private("hooks", "sim_1", {"hooks": []})
    store.link("run-interrupts", "r", "int_1")
    store.append("events", "r", {"type": "x"})
    return {
        "object": (
            store.path("interrupt", "int_1"),
            [
                lambda: store.read("interrupt", "int_1"),
                lambda: store.update("interrupt", "int_1", lambda d: d),
                lambda: store.write("interrupt", "int_1", {"status": "resolved"}),
            ],
        ),
        "private": (
            store.root / "private" / "hooks" / "sim_1.json",
            [lambda: store.read_private("hooks", "sim_1")],
        ),
        "index": (
            store.index_path("run-interrupts", "r"),
            [
                lambda: store.members("run-interrupts", "r"),
                lambda: store.link("run-interrupts", "r", "int_2"),
                lambda: store.unlink("run-interrupts", "r", "int_1"),
            ],
        ),
        "log": (
            store.root / "logs" / "events" / "r.jsonl",
            [
                lambda: store.read_log("events", "r"),
                lambda: store.log_lines("events", "r"),
                lambda: store.read_log_line("events", "r", 30),
                lambda: store.append("events", "r", {"type": "y"}),
            ],
        ),
    }


@pytest.mark.parametrize("what", UNSAFE)
@pytest.mark.parametrize("kind", ["object", "private", "index", "log"])
def test_a_store_file_that_is_not_a_regular_file_is_refused_by_name(
    store: Store, tmp_path: Path, kind: str, what: str
) -> None:
    outside = tmp_path / "outside.json"
    path, attempts = store_files(store)[kind]
    before = path.read_bytes()
    outside.write_bytes(before)
    put_in_place(path, what, outside)
    for attempt in attempts:
        raised = finishes(attempt)
        assert isinstance(raised, InvalidInput), (attempt, raised)
        assert raised.exit_code == ExitCode.INVALID_INPUT
        assert str(path) in raised.message
        assert "link" in raised.message if "link" in what else "regular file" in raised.message
    # Nothing was written through the link, and nothing made where it points.
    assert outside.read_bytes() == before
    assert not (tmp_path / "nothing").exists()
    assert path.is_symlink() or not path.is_file()


def test_writes_through_a_link_leave_its_target_as_it_was(store: Store, tmp_path: Path) -> None:
    files = store_files(store)
    for kind in ("object", "index", "log"):
        path, attempts = files[kind]
        outside = tmp_path / f"{kind}.outside"
        outside.write_bytes(path.read_bytes())
        before = outside.read_bytes()
        put_in_place(path, "link outside the store", outside)
        for attempt in attempts:
            assert isinstance(finishes(attempt), InvalidInput)
        assert outside.read_bytes() == before, kind


def test_a_tag_or_lock_linked_out_of_the_store_creates_nothing_there(
    store: Store, tmp_path: Path
) -> None:
    store.tag("pending", "a")
    marker = store.root / "tags" / "pending" / "b"
    marker.symlink_to(tmp_path / "made-by-tag")
    with pytest.raises(InvalidInput, match="made"):
        store.tag("pending", "b")
    lock = store.root / "locks" / "objects" / "run" / "r.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(tmp_path / "made-by-lock")
    with pytest.raises(InvalidInput, match="symbolic link"), store.lock("run", "r"):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_a_file_above_its_size_is_refused_before_it_is_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from belt.store import files

    store.create("run", "r", {"id": "r", "state": "working", "note": "x" * 5000})
    monkeypatch.setattr(files, "OBJECT_MAX", 4096)
    with pytest.raises(InvalidInput, match="above the 4 KiB a store file holds"):
        store.read("run", "r")
    # A sparse file of 100 GiB is refused by its size, without a byte of it read.
    path = store.path("run", "r")
    with open(path, "r+b") as handle:
        handle.truncate(100 * 1024**3)
    with pytest.raises(InvalidInput, match="107374182400 bytes"):
        store.read("run", "r")


def test_a_line_above_its_size_is_refused(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from belt.store import files

    store.append("events", "r", {"type": "small"})
    store.append("events", "r", {"type": "big", "text": "x" * 10_000})
    store.link("run-interrupts", "r", "i" * 100)
    monkeypatch.setattr(files, "LINE_MAX", 4096)
    for attempt in (
        lambda: store.read_log("events", "r"),
        lambda: store.log_lines("events", "r"),
        lambda: store.read_log_line("events", "r", len(b'{"belt":"log","schema":1}\n') + 17),
    ):
        with pytest.raises(InvalidInput, match="a line is longer than the 4 KiB"):
            attempt()
    # A header line is at most 4 KiB whatever the line limit.
    path = store.index_path("run-interrupts", "r")
    path.write_bytes(b" " * 10_000 + b'{"belt":"index","schema":1}\n')
    with pytest.raises(InvalidInput, match="a line is longer"):
        store.members("run-interrupts", "r")


@both
def test_log_lines_reads_a_part_at_a_time(store: Store) -> None:
    for number in range(10):
        store.append("events", "r", {"n": number, "pad": "x" * 100})
    seen = []
    offset = 0
    while True:
        chunk = store.log_lines("events", "r", offset, max_bytes=300)
        if not chunk.lines:
            break
        assert len(chunk.lines) <= 3
        seen += [json.loads(line)["n"] for _, line in chunk.lines]
        offset = chunk.end
    assert seen == list(range(10))
    assert offset == store.log_size("events", "r")


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_record_with_a_number_belt_never_writes_is_refused_and_kept(
    store: Store, number: str
) -> None:
    store.create("run", "r", {"id": "r", "state": "working"})
    path = store.path("run", "r")
    damage = (
        '{"belt":"object","schema":1,"kind":"run","id":"r",'
        f'"data":{{"id":"r","state":"working","extra":{number}}}}}\n'
    ).encode()
    path.write_bytes(damage)
    for attempt in (
        lambda: store.read("run", "r"),
        lambda: store.update("run", "r", lambda d: {**d, "state": "completed"}),
        lambda: store.write("run", "r", {"id": "r", "state": "completed"}),
    ):
        with pytest.raises(InvalidInput, match="not a JSON number|not finite") as caught:
            attempt()
        assert str(path) in caught.value.message
        assert path.read_bytes() == damage


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_log_line_with_a_number_belt_never_writes_is_refused(store: Store, number: str) -> None:
    store.append("journal", "serve", {"at": "t", "duration_ms": 1.5})
    path = store.root / "logs" / "journal" / "serve.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"at": "t", "duration_ms": ' + number.encode() + b"}\n")
    with pytest.raises(InvalidInput, match="line 3 holds"):
        store.read_log("journal", "serve")
    chunk = store.log_lines("journal", "serve")
    offset, line = chunk.lines[-1]
    with pytest.raises(InvalidInput, match=f"the line at byte {offset} holds"):
        store.decode_log_line("journal", "serve", line, offset, chunk.version)
    with pytest.raises(InvalidInput, match=f"the line at byte {offset} holds"):
        store.read_log_line("journal", "serve", offset)


MARK = -7.125e-301
"""A leaf of the generated records, replaced by a number belt never writes."""


@pytest.fixture(scope="module")
def run_to_damage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root of a store holding run ``r``, whose file each example overwrites whole."""
    root = tmp_path_factory.mktemp("nan") / "store"
    Store(root).create("run", "r", {"id": "r", "state": "working"})
    return root


@settings(max_examples=100, deadline=None)
@given(
    data=st.recursive(
        st.just(MARK) | st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    ),
    constant=st.sampled_from(NON_FINITE),
)
def test_a_non_finite_number_anywhere_in_a_record_is_refused(
    run_to_damage: Path, data: object, constant: str
) -> None:
    text = json.dumps({"id": "r", "state": "working", "extra": data})
    assume(repr(MARK) in text)
    store = Store(run_to_damage)
    raw = text.replace(repr(MARK), constant)
    path = store.path("run", "r")
    path.write_text(f'{{"belt":"object","schema":1,"kind":"run","id":"r","data":{raw}}}\n')
    before = path.read_bytes()
    for attempt in (
        lambda: store.read("run", "r"),
        lambda: store.write("run", "r", {"id": "r", "state": "completed"}),
    ):
        with pytest.raises(InvalidInput, match="damaged store file"):
            attempt()
    assert path.read_bytes() == before


class Widget(TypedDict):
    """A record kind of the tests' own, to show the shape check is derived from a TypedDict."""

    id: str
    size: int
    colour: NotRequired[str | None]
    notes: NotRequired[Any]


class HeavierWidget(Widget):
    weight: int


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The store's table of record TypedDicts, put back as it was after the test."""
    table = dict(shapes.RECORDS)
    monkeypatch.setattr(shapes, "RECORDS", table)
    return table


def test_the_shape_check_is_derived_from_the_records_typeddict(
    tmp_path: Path, registry: dict[str, object]
) -> None:
    store = Store(tmp_path / "store", shapes=True)
    store.create("widget", "w", {"id": "w", "size": 3, "notes": [1, {"x": None}]})
    assert store.read("widget", "w")["size"] == 3  # unknown kind so far: nothing checked
    shapes.record_shape("widget", Widget)
    assert store.read("widget", "w")["size"] == 3
    # A new required key in the TypedDict makes the same record damaged, naming the file.
    shapes.record_shape("widget", HeavierWidget)
    with pytest.raises(InvalidInput) as caught:
        store.read("widget", "w")
    assert str(store.path("widget", "w")) in caught.value.message
    assert "it is not a widget record: its weight is missing" in caught.value.message
    # The field types are the annotations': an optional key, when there, holds its type.
    shapes.record_shape("widget", Widget)
    for data, why in [
        ({"id": "w", "size": 3, "colour": 7}, "its colour is not a string or null"),
        ({"id": "w", "size": True}, "its size is not a whole number"),
        ({"id": 1, "size": 3}, "its id is not a string"),
    ]:
        Store(tmp_path / "store").write("widget", "w", data)
        with pytest.raises(InvalidInput, match=why):
            store.read("widget", "w")
    Store(tmp_path / "store").write("widget", "w", {"id": "w", "size": 3, "colour": None})
    assert store.read("widget", "w")["colour"] is None


def test_every_kind_belt_stores_has_its_shape_from_its_owners_typeddict() -> None:
    from belt.records import (
        chats,
        executions,
        hooktasks,
        interrupts,
        leases,
        messages,
        profile,
        runs,
        sims,
    )

    owners = {
        "run": runs.Run,
        "chat": chats.Chat,
        "message": messages.Message,
        "interrupt": interrupts.Interrupt,
        "profile": profile.Profile,
        "sim": sims.Sim,
        "scenario": sims.Scenario,
        "agent": sims.Agent,
        "hooks": sims.SimHooks,
        "execution": executions.ExecutionEntry,
        "hooktask": hooktasks.HookTask,
        "lease": leases.Lease,
    }
    for kind, record in owners.items():
        assert shapes.RECORDS[kind] is record, kind
        assert shapes.shape(kind) == shapes.derive(record), kind
    required, optional = shapes.derive(runs.Run)
    assert set(required) == {"id", "state"} and optional["chat_id"] == (str, type(None))


def test_a_record_typeddict_must_be_one_and_its_fields_must_have_a_json_shape() -> None:
    class Dated(TypedDict):
        when: Path

    with pytest.raises(TypeError, match="must be a TypedDict"):
        shapes.record_shape("widget", dict)
    with pytest.raises(TypeError, match="has no JSON shape"):
        shapes.derive(Dated)


def test_a_log_reader_gives_a_line_in_pieces_and_nothing_where_no_line_starts(
    store: Store,
) -> None:
    store.append("events", "r", {"text": "a" * 100})
    store.append("events", "r", {"text": "b" * 100})
    path = store.root / "logs" / "events" / "r.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"torn": ')
    (first, _), (second, line) = store.log_lines("events", "r").lines
    torn = store.log_size("events", "r") - len(b'{"torn": ')
    with store.log_reader("events", "r") as reader:
        pieces = list(reader.pieces(second, size=16))
        assert b"".join(pieces) == line and max(len(p) for p in pieces) <= 16
        assert list(reader.pieces(first + 1)) == []  # not the start of a line
        assert list(reader.pieces(torn)) == [b'{"torn": ']  # as far as it goes
        assert list(reader.pieces(0)) == []
    path.write_bytes(b'{"not": "a header"}\n')
    with pytest.raises(InvalidInput, match="header"), store.log_reader("events", "r"):
        pass
    with pytest.raises(NotFound), store.log_reader("events", "other"):
        pass


@both
def test_read_fresh_reads_a_record_again_only_when_it_was_replaced(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("run", "r", {"state": "working", "deep": {"n": 1}})
    path = store.path("run", "r")
    reads: list[Path] = []
    read_file = store._read_file

    def counted(where: Path) -> bytes:
        reads.append(where)
        return read_file(where)

    monkeypatch.setattr(store, "_read_file", counted)
    assert store.read_fresh("run", "r") == {"state": "working", "deep": {"n": 1}}
    assert reads == [path]
    kept = store.read_fresh("run", "r")
    kept["deep"]["n"] = 99  # what it gives is the caller's own copy
    assert store.read_fresh("run", "r") == {"state": "working", "deep": {"n": 1}}
    assert reads == [path]  # nothing replaced the file: not read again
    # Its own update keeps what it wrote; the update itself read nothing either.
    store.update("run", "r", lambda data: {**data, "state": "completed"})
    assert store.read_fresh("run", "r")["state"] == "completed"
    assert reads == [path]
    # Another writer (another process's store, or a write this store did not make).
    replaced = store._encode_object("run", "r", {"state": "canceled", "deep": {"n": 1}})
    if isinstance(store, MemoryStore):
        store._put_file(path, replaced)
    else:
        Store(store.root).merge("run", "r", {"state": "canceled"})
    assert store.read_fresh("run", "r")["state"] == "canceled"
    assert reads == [path, path]


@both
def test_read_if_replaced_decodes_nothing_while_the_file_is_the_one_it_gave(
    store: Store, decoded: list[object]
) -> None:
    store.create("run", "r", {"state": "working"})
    data, seen = store.read_if_replaced("run", "r", None)
    assert data == {"state": "working"} and seen is not None
    decoded.clear()
    assert store.read_if_replaced("run", "r", seen) == (None, seen)
    assert store.read_if_replaced("run", "r", seen) == (None, seen)
    assert decoded == []  # a stat, nothing decoded
    # What another call gave stands for nothing here: that one reads.
    assert store.read_if_replaced("run", "r", object())[0] == {"state": "working"}
    # Its own write replaces the file: read again (from what it wrote).
    store.update("run", "r", lambda data: {**data, "state": "completed"})
    data, seen = store.read_if_replaced("run", "r", seen)
    assert data == {"state": "completed"}
    # Another writer.
    replaced = store._encode_object("run", "r", {"state": "canceled"})
    if isinstance(store, MemoryStore):
        store._put_file(store.path("run", "r"), replaced)
    else:
        Store(store.root).merge("run", "r", {"state": "canceled"})
    assert store.read_if_replaced("run", "r", seen)[0] == {"state": "canceled"}


@both
def test_a_run_sees_a_cancel_made_after_it_last_checked(store: Store) -> None:
    from belt.records.runs import Cancelled, RunRecord, cancel_run

    run = RunRecord.create(
        store, sim_id="sim_1", agent_id="ag_1", chat_id=None, turn_index=0, execution={}
    )
    run.check_cancelled()
    run.check_cancelled()
    run.transition(execution={"next": "turn"})
    run.check_cancelled()
    other = store if isinstance(store, MemoryStore) else Store(store.root)
    cancel_run(other, run.id, force=True, how="stopped", hint="")
    with pytest.raises(Cancelled):
        run.check_cancelled()
    assert run.data["state"] == "canceled"


@both
def test_a_run_decodes_nothing_to_check_what_it_wrote_itself_yet_sees_a_later_cancel(
    store: Store, decoded: list[object]
) -> None:
    from belt.records.runs import Cancelled, RunRecord, cancel_run

    run = RunRecord.create(
        store, sim_id="sim_1", agent_id="ag_1", chat_id=None, turn_index=0, execution={}
    )
    run.check_cancelled()
    for step in range(3):
        run.transition(execution={"step": step})
        decoded.clear()
        run.check_cancelled()
        run.check_cancelled()
        assert decoded == []  # what it wrote is not cancelled: a stat, nothing decoded
    assert store.seen("run", run.id) is not None
    # Cancelled by another process right after this one's write, with no check in between.
    run.transition(execution={"step": "last"})
    other = store if isinstance(store, MemoryStore) else Store(store.root)
    cancel_run(other, run.id, force=True, how="stopped", hint="")
    with pytest.raises(Cancelled):
        run.check_cancelled()
    assert run.data["state"] == "canceled"


def test_read_fresh_reports_damage_done_after_the_record_was_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.write("agent", "ag_1", {"v": 1})
    store.write("agent", "ag_2", {"v": 2})
    path = store.path("agent", "ag_1")
    assert store.read_fresh("agent", "ag_1") == {"v": 1}
    path.write_bytes(b"{")  # in place: the same inode, another size
    with pytest.raises(InvalidInput, match="not valid JSON"):
        store.read_fresh("agent", "ag_1")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        store.update("agent", "ag_1", lambda data: data)
    assert path.read_bytes() == b"{"
    other = store.path("agent", "ag_2")
    assert store.read_fresh("agent", "ag_2") == {"v": 2}
    other.unlink()
    other.symlink_to(path.name)
    with pytest.raises(InvalidInput, match="symbolic link"):
        store.read_fresh("agent", "ag_2")
    with pytest.raises(InvalidInput, match="symbolic link"):
        store.update("agent", "ag_2", lambda data: data)


def test_an_append_reads_the_header_again_only_when_the_file_changed_since_its_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    store.append("events", "r", {"n": 1})
    path = store.root / "logs" / "events" / "r.jsonl"
    firsts: list[Path] = []
    first_line = store._first_line

    def counted(where: Path) -> bytes:
        firsts.append(where)
        return first_line(where)

    monkeypatch.setattr(store, "_first_line", counted)
    store.append("events", "r", {"n": 2})
    store.append("events", "r", {"n": 3})
    assert firsts == []  # as its own last append left it
    Store(store.root).append("events", "r", {"n": 4})  # another process's
    store.append("events", "r", {"n": 5})
    assert firsts == [path]
    newer = path.read_bytes().replace(b'"schema":1', b'"schema":9', 1)
    path.write_bytes(newer)  # in place, after this store's last append
    with pytest.raises(InvalidInput, match="newer belt"):
        store.append("events", "r", {"n": 6})
    assert path.read_bytes() == newer


def test_a_new_log_is_created_without_waiting_for_its_lock(tmp_path: Path) -> None:
    import fcntl

    store = Store(tmp_path / "store", fsync=False)
    lock = store.root / "locks" / "logs" / "events" / "r.lock"
    lock.parent.mkdir(parents=True)
    held = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # as another process appending to it would
    try:
        writer = threading.Thread(target=store.append, args=("events", "r", {"n": 1}))
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive()  # created exclusively, no lock taken
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
        writer.join()
    assert store.read_log("events", "r") == [{"n": 1}]
    store.append("events", "r", {"n": 2})  # an existing log: under its lock, as ever
    assert Store(store.root).read_log("events", "r") == [{"n": 1}, {"n": 2}]
    assert not (store.root / "locks" / "logs" / "events" / "s.lock").exists()
    store.append("events", "s", {"n": 1})
    assert not (store.root / "locks" / "logs" / "events" / "s.lock").exists()


@both
def test_a_log_made_by_another_writer_while_one_creates_it_keeps_both_lines(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = store if isinstance(store, MemoryStore) else Store(store.root)
    real_write, real_put = files.atomic_write, store._put_lines
    raced: list[bool] = []

    def racing(path: Path, data: bytes, **options: Any) -> int | None:
        if not raced:  # the other writer creates the log between this one's look and write
            raced.append(True)
            other.append("events", "r", {"by": "other"})
        return real_write(path, data, **options)

    def taken(path: Path, blob: bytes, *, sync: bool) -> int | None:
        if not raced:
            raced.append(True)
            other.append("events", "r", {"by": "other"})
        return real_put(path, blob, sync=sync)

    # A writer in the middle of its own creation (under the lock), or of one without it.
    monkeypatch.setattr(files, "atomic_write", racing)
    monkeypatch.setattr(store, "_put_lines", taken)
    store.append("events", "r", {"by": "this"})
    assert store.read_log("events", "r") == [{"by": "other"}, {"by": "this"}]


def counted_opens(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths the store opens from now on, in order (it still opens them)."""
    opened: list[Path] = []
    real = files.open_regular

    def counted(where: Path, **options: Any) -> int:
        opened.append(Path(where))
        return real(where, **options)

    monkeypatch.setattr(files, "open_regular", counted)
    monkeypatch.setattr(store_module, "open_regular", counted)
    return opened


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_an_append_opens_the_log_again_only_when_the_file_changed_since_its_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    store.append("events", "r", {"n": 1})
    path = store.root / "logs" / "events" / "r.jsonl"
    opened = counted_opens(monkeypatch)
    store.append("events", "r", {"n": 2})
    store.append_group("events", "r", [{"n": 3}, {"n": 4}])
    assert opened == []  # through the descriptor its last append left open
    Store(store.root).append("events", "r", {"n": 5})  # another process's
    store.append("events", "r", {"n": 6})
    assert path in opened
    assert [record["n"] for record in store.read_log("events", "r")] == [1, 2, 3, 4, 5, 6]
    # Replaced by another file: the next append goes to the file now at the path.
    other = path.with_name("other.jsonl")
    other.write_bytes(b'{"belt":"log","schema":1}\n{"n":0}\n')
    os.replace(other, path)
    store.append("events", "r", {"n": 7})
    assert [record["n"] for record in store.read_log("events", "r")] == [0, 7]
    root = store.root
    assert open_files_under(root) == 1
    del store
    assert open_files_under(root) == 0


def test_an_update_of_a_kept_record_pins_it_by_the_descriptor_it_was_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    store.write("agent", "ag_1", {"v": 0})
    store.read_fresh("agent", "ag_1")
    opened = counted_opens(monkeypatch)
    store.update("agent", "ag_1", lambda data: {"v": 1})
    store.merge("agent", "ag_1", {"w": 2})
    store.write("agent", "ag_1", {"v": 3})
    assert store.read_fresh("agent", "ag_1") == {"v": 3}
    assert opened == [store.path("agent", "ag_1")]  # write reads the file it replaces, once
    Store(store.root).write("agent", "ag_1", {"v": 4})  # another process's
    assert store.read_fresh("agent", "ag_1") == {"v": 4}


def target(fd: str) -> str:
    """What this process's descriptor ``fd`` is open on ("" when it is closed)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def open_targets() -> list[str]:
    """What this process's descriptors are open on."""
    return [target(fd) for fd in os.listdir("/proc/self/fd")]


def open_files_under(root: Path) -> int:
    """How many descriptors of this process are open on files under ``root``, but for its lock
    files (which a process keeps open: ``lock_files_open``)."""
    locks = f"{root}/locks/"
    return sum(t.startswith(f"{root}/") and not t.startswith(locks) for t in open_targets())


def lock_files_open(root: Path) -> int:
    """How many descriptors of this process are open on lock files under ``root``."""
    return sum(target.startswith(f"{root}/locks/") for target in open_targets())


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_read_fresh_holds_each_kept_file_open_a_bounded_number_and_closes_them_with_the_store(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    store.write("agent", "ag_0", {"v": 0})
    store.read_fresh("agent", "ag_0")
    # Open, so that no later file is given its inode, and so its stamp, while it is kept.
    assert open_files_under(store.root) == 1
    for number in range(1, FRESH_KEPT * 2):
        store.write("agent", f"ag_{number}", {"v": number})
        store.read_fresh("agent", f"ag_{number}")
    assert 1 <= open_files_under(store.root) <= FRESH_KEPT
    store.update("agent", f"ag_{FRESH_KEPT * 2 - 1}", lambda data: {"v": -1})
    assert open_files_under(store.root) <= FRESH_KEPT  # the replaced file's was closed
    root = store.root
    del store
    assert open_files_under(root) == 0

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
from pathlib import Path

import pytest

from belt.errors import Conflict, ExitCode, InvalidInput, NotFound
from belt.store import SCHEMA_VERSION, Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_open_store_lives_under_belt_home(belt_home: Path) -> None:
    store = open_store()
    store.create("run", "run_1", {"state": "working"})
    assert store.root == belt_home / "store"
    assert (belt_home / "store" / "objects" / "run" / "run_1.json").is_file()


def test_objects_round_trip_inside_a_versioned_envelope(store: Store) -> None:
    store.create("interrupt", "int_1", {"status": "pending", "n": [1, 2]})
    assert store.read("interrupt", "int_1") == {"status": "pending", "n": [1, 2]}
    assert store.get("interrupt", "int_1") == {"status": "pending", "n": [1, 2]}
    assert store.exists("interrupt", "int_1")
    on_disk = json.loads(store.path("interrupt", "int_1").read_text())
    assert on_disk == {
        "belt": "object",
        "schema": SCHEMA_VERSION,
        "kind": "interrupt",
        "id": "int_1",
        "data": {"status": "pending", "n": [1, 2]},
    }
    assert oct(store.path("interrupt", "int_1").stat().st_mode & 0o777) == oct(0o600)


def test_missing_objects(store: Store) -> None:
    assert store.get("run", "nope") is None
    assert not store.exists("run", "nope")
    with pytest.raises(NotFound) as caught:
        store.read("run", "nope")
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    with pytest.raises(NotFound):
        store.update("run", "nope", lambda d: d)
    assert not (store.root / "locks").exists()


def test_create_refuses_an_existing_id_and_leaves_it(store: Store) -> None:
    store.create("chat", "ch_1", {"v": 1})
    before = snapshot(store.root)
    with pytest.raises(Conflict) as caught:
        store.create("chat", "ch_1", {"v": 2})
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert snapshot(store.root) == before


def test_write_creates_and_replaces(store: Store) -> None:
    store.write("agent", "ag_1", {"v": 1})
    store.write("agent", "ag_1", {"v": 2})
    assert store.read("agent", "ag_1") == {"v": 2}
    assert store.list_ids("agent") == ["ag_1"]


def test_update_writes_what_fn_returns(store: Store) -> None:
    store.create("run", "r", {"n": 1, "deep": {"a": 1}})
    result = store.update("run", "r", lambda d: {**d, "n": d["n"] + 1})
    assert result == {"n": 2, "deep": {"a": 1}}
    assert store.read("run", "r") == result


def test_update_writes_nothing_when_fn_raises(store: Store) -> None:
    store.create("run", "r", {"n": 1, "deep": {"a": 1}})
    before = snapshot(store.root)

    def broken(data: dict) -> dict:
        data["deep"]["a"] = 99  # mutates the copy it was given, then fails
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.update("run", "r", broken)
    assert store.read("run", "r") == {"n": 1, "deep": {"a": 1}}
    assert {k: v for k, v in snapshot(store.root).items() if "locks" not in k} == before


def test_list_ids_skips_temporary_files(store: Store) -> None:
    for name in ("b", "a", "c"):
        store.create("message", name, {})
    (store.root / "objects" / "message" / ".a.json.x1.tmp").write_text("{")
    assert store.list_ids("message") == ["a", "b", "c"]
    assert store.list_ids("nothing") == []


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


def test_logs_append_in_order(store: Store) -> None:
    for i in range(3):
        store.append("events", "run_1", {"i": i})
    assert store.read_log("events", "run_1") == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert store.read_log("events", "run_2") == []
    first = (store.root / "logs" / "events" / "run_1.jsonl").read_text().splitlines()[0]
    assert json.loads(first) == {"belt": "log", "schema": SCHEMA_VERSION}


def test_a_torn_last_line_is_skipped_and_cut_by_the_next_append(store: Store) -> None:
    store.append("journal", "serve", {"i": 0})
    path = store.root / "logs" / "journal" / "serve.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"i": 1, "pad": "xx')  # a writer killed mid-line
    assert store.read_log("journal", "serve") == [{"i": 0}]
    store.append("journal", "serve", {"i": 2})
    assert store.read_log("journal", "serve") == [{"i": 0}, {"i": 2}]
    assert path.read_bytes().endswith(b'{"i":2}\n')


def test_tags(store: Store) -> None:
    store.tag("pending-interrupts", "002-b")
    store.tag("pending-interrupts", "001-a")
    store.tag("pending-interrupts", "001-a")
    assert store.tagged("pending-interrupts") == ["001-a", "002-b"]
    store.untag("pending-interrupts", "001-a")
    store.untag("pending-interrupts", "001-a")
    assert store.tagged("pending-interrupts") == ["002-b"]
    assert store.tagged("other") == []


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

# examples/nexus_stop.py: py:examples/nexus_stop.py:check, a Nexus stop hook in Python.
from belt.wire.nexus import HookTaskInput


def check(task: HookTaskInput) -> dict:
    """Ask for one more round until the answer says the tests pass; acknowledge the rest."""
    if task.event == "stop" and "tests pass" not in (task.output_preview or ""):
        feedback = "Run the tests and report whether they pass."
        return {"structured_content": {"continue": True, "feedback": feedback}}
    return {"structured_content": {"continue": False}}

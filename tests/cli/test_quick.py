from tests.cli.runner import belt


def test_version_prints_version() -> None:
    result = belt("version")
    assert result.exit_code == 0
    assert result.stdout.startswith("belt ")

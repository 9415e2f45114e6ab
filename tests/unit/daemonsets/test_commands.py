"""Every container running the suite's image starts a program the image has, with flags and environment
that program accepts: suite programs are parsed by their own settings readers (tests/unit/daemonsets/
programs.py), other commands must be Debian programs (checked against the Containerfile by
test_image.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.daemonsets import programs
from tests.unit.daemonsets.rendered import container_env, ident, suite_containers

CASES = list(suite_containers())
SUITE = [(w, c) for w, c in CASES if "/" not in c.get("command", ["/"])[0]]


def _id(case: tuple[dict[str, Any], dict[str, Any]]) -> str:
    return f"{ident(case[0])}/{case[1]['name']}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_container_names_its_command(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    container = case[1]
    command = container.get("command") or []
    assert command, f"{_id(case)}: the image has no default command; name the program"
    assert "/" in command[0] or command[0] in programs.SCRIPTS, f"{_id(case)}: unknown program {command[0]}"


@pytest.mark.parametrize("case", SUITE, ids=_id)
def test_suite_program_accepts_the_manifest_flags_and_env(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    workload, container = case
    command: list[str] = [*container["command"], *(container.get("args") or [])]
    program, argv = command[0], command[1:]
    programs.parse(program, argv, container_env(workload, container))


def test_the_check_refuses_an_unknown_flag_and_a_bad_value() -> None:
    with pytest.raises(AssertionError, match="unrecognized arguments: --no-such-flag"):
        programs.parse("fiberlb-controller", ["--no-such-flag"], {})
    with pytest.raises(AssertionError, match="prismnet-agent"):
        programs.parse("prismnet-agent", [], {"PRISMNET_CLUSTER_CIDR": "not-a-cidr"})


def test_every_daemon_entry_point_has_a_settings_reader() -> None:
    for program in programs.SCRIPTS:
        if program not in ("prismnet", "k8shost-node"):  # the CNI shim (CNI protocol) and the dev tool
            assert callable(programs.reader(program))

"""python-ovs parses OVSDB traffic with its C parser (scripts/ovs_json_accel.py links it in)."""

from __future__ import annotations

import json

import ovs.json  # type: ignore[import-untyped]

UPDATE = (
    '{"method":"update","params":[null,{"Interface":{"0c8f3a4e-0000-4000-8000-000000000001":'
    '{"new":{"name":"pn0123456789a","external_ids":["map",[["iface-id","p-1"],'
    '["ovn-installed","true"]]],"ofport":7}}}}],"id":null}'
)


def test_python_ovs_uses_its_c_json_parser() -> None:
    assert ovs.json.PARSER == ovs.json.PARSER_C, (
        "python-ovs fell back to its pure-Python JSON parser: run scripts/setup.sh "
        "(needs Debian's python3-openvswitch for this Python version)"
    )


def test_c_parser_reads_an_ovsdb_update_like_the_stdlib() -> None:
    parser = ovs.json.Parser(check_trailer=True)
    half = len(UPDATE) // 2
    parser.feed(UPDATE[:half])  # a message split across two reads, as from a socket
    parser.feed(UPDATE[half:])
    assert parser.finish() == json.loads(UPDATE)

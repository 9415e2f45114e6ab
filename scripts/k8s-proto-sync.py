#!/usr/bin/env python3
"""Copies Kubernetes' published protobuf wire contract (k8s.io/api and k8s.io/apimachinery
`generated.proto` files at one release tag) into protos/k8s/, and writes protos/k8s/omitempty.json:
for each message, the scalar fields whose Go field is a non-pointer with `json:",omitempty"`.

Go's protobuf marshalling writes every non-pointer field, zero or not, while its JSON form omits
such fields when zero; the API double decodes protobuf bodies to that JSON form, so it needs to
know which zero scalars JSON would drop. That is read from the Go struct tags of the same tag's
types (types.go and friends), once, here; the output is committed.

Usage: scripts/k8s-proto-sync.py --api GITDIR --apimachinery GITDIR [--tag v0.32.4]
(GITDIR: a clone, bare or not, of kubernetes/api resp. kubernetes/apimachinery).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

API_PACKAGES = (
    "core/v1", "apps/v1", "batch/v1", "rbac/v1", "networking/v1", "policy/v1", "scheduling/v1",
    "autoscaling/v1", "autoscaling/v2", "authentication/v1", "authorization/v1", "coordination/v1",
    "discovery/v1", "events/v1", "storage/v1", "certificates/v1", "node/v1",
)  # fmt: skip
MACHINERY_PACKAGES = (
    "pkg/api/resource", "pkg/apis/meta/v1", "pkg/runtime", "pkg/runtime/schema", "pkg/util/intstr",
)  # fmt: skip
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
_FIELD = re.compile(r'^\t(\w+)\s+(\S+)\s+`[^`]*json:"([^"]*)"[^`]*protobuf:"([^"]*)"', re.M)


def _git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True, text=True).stdout


def _go_sources(gitdir: str, tag: str, pkg: str) -> list[str]:
    names = _git(gitdir, "ls-tree", "--name-only", f"{tag}:{pkg}").split()
    keep = [
        n
        for n in names
        if n.endswith(".go") and not n.endswith("_test.go") and not n.startswith(("zz_", "generated"))
    ]
    return [_git(gitdir, "show", f"{tag}:{pkg}/{n}") for n in keep]


def omitted_zero_fields(sources: list[str]) -> dict[str, list[str]]:
    """struct name -> proto field names of non-pointer `omitempty` fields."""
    out: dict[str, list[str]] = {}
    for src in sources:
        for struct in _STRUCT.finditer(src):
            names = []
            for _go, gotype, jtag, ptag in _FIELD.findall(struct.group(2)):
                opts = jtag.split(",")[1:]
                pname = next((p[5:] for p in ptag.split(",") if p.startswith("name=")), "")
                if "omitempty" in opts and not gotype.startswith("*") and pname:
                    names.append(pname)
            if names:
                out[struct.group(1)] = sorted(names)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", required=True, help="git dir of kubernetes/api")
    ap.add_argument("--apimachinery", required=True, help="git dir of kubernetes/apimachinery")
    ap.add_argument("--tag", default="v0.32.4", help="release tag (kubectl 1.32's)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "protos" / "k8s"))
    args = ap.parse_args()
    out = Path(args.out)
    table: dict[str, list[str]] = {}
    sets = (
        (args.api, "k8s.io/api", API_PACKAGES),
        (args.apimachinery, "k8s.io/apimachinery", MACHINERY_PACKAGES),
    )
    for gitdir, module, pkgs in sets:
        for pkg in pkgs:
            dest = out / module / pkg / "generated.proto"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(_git(gitdir, "show", f"{args.tag}:{pkg}/generated.proto"))
            proto_pkg = f"{module}/{pkg}".replace("/", ".")
            for struct, fields in omitted_zero_fields(_go_sources(gitdir, args.tag, pkg)).items():
                table[f"{proto_pkg}.{struct}"] = fields
    doc = {
        "source": f"k8s.io/api and k8s.io/apimachinery {args.tag}",
        "messages": dict(sorted(table.items())),
    }
    (out / "omitempty.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()

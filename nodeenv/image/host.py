"""What this machine lends the image build: its Debian apt sources, its apt settings, and the files
the package managers inside the build need to reach their registries (CA bundle, pip configuration).

None of it is baked into the image. The sources become the base image's sources.list (they are
public mirror addresses, as in any Debian image); the apt settings, the CA bundle and the pip
configuration are passed to `podman build` as secrets, mounted only while a RUN step runs.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

APT_ETC = Path("/etc/apt")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class HostConfigError(RuntimeError):
    """This machine's configuration cannot be passed to the build (the message says what and why)."""


@dataclass(frozen=True, slots=True)
class Secret:
    """A `podman build --secret id=<id>,src=<source>`; the Containerfile mounts it by id."""

    id: str
    source: Path


# pip's configuration, mounted in the build stage where pip reads it (site-wide files; the options in
# them may name each other, e.g. xdg pip.conf's `constraint = /etc/xdg/pip/constraints.txt`).
PIP_SECRETS = {
    Path("/etc/pip.conf"): "pip.conf",
    Path("/etc/xdg/pip/pip.conf"): "xdg-pip.conf",
    Path("/etc/xdg/pip/constraints.txt"): "xdg-pip-constraints",
}


def _suite_matches(suite: str, codename: str) -> bool:
    return suite == codename or suite.startswith(f"{codename}-")


def _one_line_entry(line: str, codename: str) -> str | None:
    """A `deb [opts] URI SUITE COMPONENTS` line as a deb822 stanza, if its suite is the codename's."""
    words = line.split()
    options: list[str] = []
    if len(words) > 1 and words[1].startswith("["):
        end = next(i for i, w in enumerate(words) if w.endswith("]"))
        options, words = [w.strip("[]") for w in words[1 : end + 1]], [words[0], *words[end + 1 :]]
    if words[0] != "deb" or len(words) < 3 or not _suite_matches(words[2], codename):
        return None
    names = {"signed-by": "Signed-By", "arch": "Architectures", "trusted": "Trusted"}
    fields = ["Types: deb", f"URIs: {words[1]}", f"Suites: {words[2]}", f"Components: {' '.join(words[3:])}"]
    for option in filter(None, options):
        key, _, value = option.partition("=")
        if key in names:
            fields.append(f"{names[key]}: {value}")
    return "\n".join(fields)


def _deb822_stanza(stanza: str, codename: str) -> str | None:
    """A deb822 stanza restricted to the codename's suites (None: it has none, or is disabled)."""
    fields: list[list[str]] = []
    for line in stanza.splitlines():
        if line.startswith("#"):
            continue
        if line[:1].isspace() and fields:
            fields[-1].append(line)
        else:
            fields.append([line])
    values = {f[0].partition(":")[0].strip().lower(): f[0].partition(":")[2].strip() for f in fields}
    suites = [s for s in values.get("suites", "").split() if _suite_matches(s, codename)]
    if "deb" not in values.get("types", "").split() or values.get("enabled", "yes") == "no" or not suites:
        return None
    out = []
    for field in fields:
        key = field[0].partition(":")[0].strip().lower()
        replaced = {"types": ["Types: deb"], "suites": [f"Suites: {' '.join(suites)}"]}
        out += replaced.get(key, field)
    return "\n".join(out)


def debian_sources(files: dict[str, str], codename: str) -> str:
    """This machine's apt sources of the given Debian release, as one deb822 sources file.

    `files` maps each sources file name (`sources.list`, `x.list`, `x.sources`) to its text; entries
    of other releases or other archives (a vendor's `nodistro`, `cloud-sdk-bookworm`) are left out."""
    stanzas: list[str | None] = []
    for name, text in files.items():
        if name.endswith(".sources"):
            stanzas += [_deb822_stanza(s, codename) for s in text.split("\n\n") if s.strip()]
        elif name.endswith(".list"):
            lines = (line.split("#")[0].strip() for line in text.splitlines())
            stanzas += [_one_line_entry(line, codename) for line in lines if line]
    found = [s for s in stanzas if s]
    if not found:
        raise HostConfigError(f"this machine's apt sources ({', '.join(files)}) name no {codename} suite")
    return "\n\n".join(found) + "\n"


# The releases a machine's sources may be renamed to: ones its mirrors serve and its keyring verifies.
NEXT_RELEASE = {"bookworm": ("trixie",)}


def release_sources(files: dict[str, str], codename: str, host_codename: str) -> str:
    """The apt sources of `codename` for a base image: this machine's own entries of that release, or,
    when it names none (a Debian 12 machine making a Debian 13 base), its entries of its own release
    `host_codename` with each suite renamed (`bookworm-security` -> `trixie-security`): the same
    mirrors, proxies and keyring (Debian 12's debian-archive-keyring holds Debian 13's release key)."""
    try:
        return debian_sources(files, codename)
    except HostConfigError:
        if codename not in NEXT_RELEASE.get(host_codename, ()):
            raise
    stanzas = debian_sources(files, host_codename).rstrip("\n").split("\n\n")
    out = []
    for stanza in stanzas:
        lines = []
        for line in stanza.splitlines():
            if line.startswith("Suites:"):
                suites = [codename + s[len(host_codename) :] for s in line.partition(":")[2].split()]
                line = f"Suites: {' '.join(suites)}"
            lines.append(line)
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def host_codename(os_release: Path = Path("/etc/os-release")) -> str:
    """This machine's Debian release (VERSION_CODENAME of /etc/os-release)."""
    for line in os_release.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "VERSION_CODENAME" and value.strip('"'):
            return value.strip('"')
    raise HostConfigError(f"{os_release} names no VERSION_CODENAME")


def read_sources(etc: Path = APT_ETC) -> dict[str, str]:
    """The sources files apt reads (sources.list, sources.list.d/*.list and *.sources)."""
    paths = [etc / "sources.list"] if (etc / "sources.list").exists() else []
    parts = etc / "sources.list.d"
    paths += sorted(p for p in parts.glob("*") if p.suffix in (".list", ".sources")) if parts.is_dir() else []
    return {p.name: p.read_text() for p in paths}


def _apt_dump(env: dict[str, str]) -> set[str]:
    proc = subprocess.run(["apt-config", "dump"], env=env, capture_output=True, text=True, check=True)
    return set(proc.stdout.splitlines())


def apt_settings() -> str:
    """The `Acquire::` settings this machine's apt configuration adds to apt's defaults (proxies,
    Check-Valid-Until for a snapshot mirror, TLS options), in apt.conf syntax."""
    with tempfile.NamedTemporaryFile("w", suffix=".conf") as empty:
        empty.write('Dir::Etc::Parts "/nonexistent";\nDir::Etc::main "/dev/null";\n')
        empty.flush()
        defaults = _apt_dump({**os.environ, "APT_CONFIG": empty.name})
    host = _apt_dump(dict(os.environ))
    added = sorted(
        line
        for line in host - defaults
        if line.startswith("Acquire::") and not line.startswith("Acquire::IndexTargets")
    )
    return "".join(f"{line}\n" for line in added if not line.endswith(' "";'))


def pip_secrets(present: list[Path]) -> list[Secret]:
    """The pip configuration files among `present` as secrets; a file pip would read that the
    Containerfile does not mount is an error, never silently dropped."""
    unknown = [str(p) for p in present if p not in PIP_SECRETS]
    if unknown:
        raise HostConfigError(
            f"pip configuration the build cannot pass: {', '.join(unknown)} "
            "(add it to nodeenv/image/host.py PIP_SECRETS and a secret mount in the Containerfile)"
        )
    return [Secret(PIP_SECRETS[p], p) for p in present]


def present_pip_files() -> list[Path]:
    xdg = Path("/etc/xdg/pip")
    files = [Path("/etc/pip.conf")] if Path("/etc/pip.conf").is_file() else []
    return files + (sorted(p for p in xdg.iterdir() if p.is_file()) if xdg.is_dir() else [])


def host_secrets(work: Path) -> list[Secret]:
    """Every secret the build gets from this machine; the apt settings are written to `work`."""
    if not CA_BUNDLE.is_file():
        raise HostConfigError(f"no CA bundle at {CA_BUNDLE} (Debian's ca-certificates)")
    apt_conf = work / "host-apt.conf"
    apt_conf.write_text(apt_settings() + 'Acquire::https::CaInfo "/run/secrets/ca";\n')
    return [Secret("ca", CA_BUNDLE), Secret("apt.conf", apt_conf), *pip_secrets(present_pip_files())]

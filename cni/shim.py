"""`prismnet`: the CNI executable. Stdlib only, so that a call costs tens of milliseconds.

It answers VERSION itself and forwards every other verb (the CNI_* environment and the
network configuration on stdin) to prismnet-agent over a unix socket, then prints the
agent's answer on stdout: that is the CNI protocol. Logs go to stderr.

The agent's socket comes from the network configuration: the plugin's `agentSocket` key
(written by node-up and the DaemonSet's installer, `cni.install`), so a runtime needs nothing
but the conflist. `PRISMNET_AGENT_SOCKET` in the environment overrides it; without either the
socket is `/run/prismnet/cni.sock`.

The hot path imports only the built-in `posix`, `sys` and `_socket` plus the C `_json` scanner
(`os` costs ~1.5 ms with `-S`; `socket` pulls in `enum` and `selectors`, `json` pulls in `re`:
together ~15 ms more, while reading `agentSocket` with `_json` alone costs ~0.5 ms); the CNI_*
variables are forwarded as the bytes the kernel gave us. `cni.errors` is imported only to
answer VERSION (without `json`: its C encoder writes the reply) or to report a failure. The
installed executable is a two-line script run as `python -IS` (see `launcher_script`), so
site-packages is not imported either.

Before the agent is tried the shim checks what it can alone, so that a wrong configuration is
never answered with "agent not reachable" (code 11, which a runtime retries): stdin must be one
JSON object (code 6) of at most MAX_NETCONF bytes and `agentSocket`, when given, an absolute
socket path (code 7). Everything else is the agent's to validate (cni/wire.py).

Request framing (agent side: `cni.daemon.server.parse_shim_request`): the CNI_* variables
as NUL-separated `KEY=VALUE` items, an empty item, then stdin verbatim. The reply body is
exactly what goes to stdout; HTTP status 200 means exit 0.
"""

import _socket
import posix
import sys

DEFAULT_SOCKET = "/run/prismnet/cni.sock"
SOCKET_KEY = "agentSocket"
"""The plugin's conflist key naming the agent's socket."""
SOCKET_ENV = b"PRISMNET_AGENT_SOCKET"
"""Overrides SOCKET_KEY (for operators; runtimes never set it)."""
TIMEOUT = 110.0  # below kubelet's own CNI timeout; the agent bounds its waits far lower
MAX_NETCONF = 1 << 20
"""Bytes of stdin read at most: a netconf with a prevResult is a few KiB (the agent takes 4 MiB)."""
MAX_SOCKET_PATH = 107
"""sun_path holds 108 bytes with the terminating NUL."""


def main() -> int:
    env = posix.environ  # bytes -> bytes, as inherited
    stdin = sys.stdin.buffer.read(MAX_NETCONF + 1)  # never more: a runaway writer cannot fill our memory
    command = env.get(b"CNI_COMMAND", b"").decode("utf-8", "replace")
    if command == "VERSION":
        return _version(stdin)
    if not command:
        return _fail("InvalidEnvironment", "CNI_COMMAND is not set", "", stdin)
    try:  # the configuration is read and validated before the agent is tried
        sock_path, source = agent_socket(env.get(SOCKET_ENV, b""), read_netconf(stdin))
    except _BadConfig as e:
        return _fail(e.kind, e.msg, e.details, stdin)
    items = [k + b"=" + v for k, v in env.items() if k.startswith(b"CNI_")]
    try:
        status, body = post_unix(sock_path, "/cni", b"\0".join([*items, b"", stdin]), TIMEOUT)
    except OSError as e:
        kind = "PluginNotAvailable" if command == "STATUS" else "AgentUnreachable"
        hint = f"prismnet-agent is not reachable on {sock_path} ({source}): start prismnet-agent"
        return _fail(kind, hint, f"{type(e).__name__}: {e}", stdin)
    if status != 200 and not body.startswith(b"{"):  # not the agent's CNI error: never print it as ours
        detail = body[:200].decode("utf-8", "replace")
        return _fail(
            "InternalError", f"prismnet-agent answered HTTP {status} without a CNI error", detail, stdin
        )
    sys.stdout.buffer.write(body)
    return 0 if status == 200 else 1


class _BadConfig(Exception):
    def __init__(self, kind: str, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.kind, self.msg, self.details = kind, msg, details


def agent_socket(override: bytes, conf: dict[str, object]) -> tuple[str, str]:
    """(socket path, where it came from): the override, else the netconf's agentSocket, else the default.

    The netconf's value is checked even when the override wins: a wrong conflist is found at once,
    not on the first node without the override.
    """
    value = conf.get(SOCKET_KEY)
    if value is not None:
        problem = socket_path_problem(value)
        if problem:
            raise _BadConfig("InvalidNetworkConfig", f"{SOCKET_KEY!r} {problem}, got {value!r:.120}")
    if override:
        path = override.decode("utf-8", "surrogateescape")
        problem = socket_path_problem(path)
        if problem:
            env_name = SOCKET_ENV.decode()
            raise _BadConfig("InvalidEnvironment", f"{env_name} {problem}, got {path!r:.120}")
        return path, SOCKET_ENV.decode()
    if value is None:
        return DEFAULT_SOCKET, "the default; the network configuration names no agentSocket"
    return str(value), f"{SOCKET_KEY} in the network configuration"


def socket_path_problem(value: object) -> str:
    """Why `value` cannot name a unix socket ("" if it can)."""
    if not isinstance(value, str) or not value.startswith("/"):
        return "must be an absolute path"
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "must be UTF-8 text"
    if b"\0" in raw or len(raw) > MAX_SOCKET_PATH:
        return f"must be a path of at most {MAX_SOCKET_PATH} bytes without NUL"
    return ""


class _ScanContext:
    """What `_json.make_scanner` reads from its context (the attributes of json.JSONDecoder)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


def read_netconf(stdin: bytes) -> dict[str, object]:
    """The netconf on stdin as a JSON object, parsed by the C scanner of the stdlib's json without
    importing `json` (whose `re` dependency costs ~14 ms). Raises _BadConfig (code 6 or 7)."""
    if len(stdin) > MAX_NETCONF:
        raise _BadConfig(
            "InvalidNetworkConfig", f"the network configuration on stdin is larger than {MAX_NETCONF} bytes"
        )
    try:
        text = stdin.decode("utf-8").strip(" \t\r\n")
    except UnicodeDecodeError as e:
        raise _BadConfig("DecodeFailure", "the network configuration on stdin is not UTF-8", str(e)) from e
    if not text:
        raise _BadConfig("DecodeFailure", "no network configuration on stdin (a JSON object is expected)")
    obj = _scan(text)
    if not isinstance(obj, dict):
        raise _BadConfig("DecodeFailure", "the network configuration must be a JSON object")
    return obj


def netconf_value(stdin: bytes, key: str) -> object:
    """A top-level key of the netconf (None if absent); raises _BadConfig as `read_netconf`."""
    return read_netconf(stdin).get(key)


def _scan(text: str) -> object:
    import _json

    try:
        obj, end = _json.make_scanner(_ScanContext())(text, 0)  # type: ignore[arg-type]  # typeshed: a decoder
    except RecursionError as e:
        raise _BadConfig("DecodeFailure", "the network configuration on stdin is nested too deeply") from e
    except Exception:  # the C scanner raises its errors through json.decoder, only if imported
        return _decode_slowly(text)
    if end != len(text):
        return _decode_slowly(text)  # trailing data: json's message says where
    return obj


def _decode_slowly(text: str) -> object:
    """Only when the fast scan failed: `json` for its error message."""
    import json

    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _BadConfig("DecodeFailure", "cannot decode the network configuration on stdin", str(e)) from e


def _version(stdin: bytes) -> int:
    """The VERSION reply, encoded by the C encoder of the stdlib's json (runtimes such as podman
    ask every plugin before each ADD and DEL, so this path is as hot as ADD)."""
    import _json

    from cni.errors import SUPPORTED_VERSIONS

    enc = _json.encode_basestring_ascii
    versions = ", ".join(enc(v) for v in SUPPORTED_VERSIONS)
    sys.stdout.write(f'{{"cniVersion": {enc(_requested_version(stdin))}, "supportedVersions": [{versions}]}}')
    return 0


def _fail(kind: str, msg: str, details: str, stdin: bytes) -> int:
    from cni import errors

    err: errors.CniError = getattr(errors, kind)(msg, details)
    sys.stdout.write(err.to_json(_requested_version(stdin)))
    sys.stderr.write(f"prismnet: {err}\n")
    return 1


def _requested_version(stdin: bytes) -> str:
    from cni.errors import LATEST_VERSION

    try:
        value = netconf_value(stdin, "cniVersion")
    except _BadConfig:
        return LATEST_VERSION
    return value if isinstance(value, str) and value else LATEST_VERSION


def post_unix(path: str, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    """A minimal HTTP/1.0 POST over a unix socket (http.client costs ~10 ms to import)."""
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        head = f"POST {url} HTTP/1.0\r\nHost: prismnet\r\nContent-Type: application/octet-stream\r\n"
        s.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    finally:
        s.close()
    raw = b"".join(chunks)
    header, sep, payload = raw.partition(b"\r\n\r\n")
    parts = header.split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"malformed reply from prismnet-agent: {raw[:80]!r}")
    return int(parts[1]), payload


def run() -> None:
    """`main`, then exit at once: the interpreter's finalisation (module teardown, a last garbage
    collection) is ~1.3 ms of a ~9 ms call and a process about to end needs none of it. An
    exception from `main` still ends in its traceback and exit status 1."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    posix._exit(code)


def launcher_script(python: str, repo: str) -> str:
    """The text of the installed `prismnet` executable: isolated, no site-packages."""
    return f"#!{python} -IS\nimport sys\nsys.path.insert(0, {repo!r})\nfrom cni.shim import run\nrun()\n"


if __name__ == "__main__":
    run()

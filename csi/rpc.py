"""The gRPC edge of every servicer method: CsiError -> status code, crash -> INTERNAL, no secrets logged."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message

from csi.errors import CsiError
from protos import csi_pb2

log = logging.getLogger("csi.rpc")

STRIPPED = "***stripped***"
# mount_flags "may carry sensitive data" per the CSI spec, so they are stripped as well.
_SENSITIVE_NAMES = frozenset({"mount_flags"})

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
Method = Callable[[Any, Req, grpc.ServicerContext], Resp]


def _is_secret(field: Any) -> bool:
    opts = field.GetOptions()
    return bool(opts.Extensions[csi_pb2.csi_secret]) or field.name in _SENSITIVE_NAMES


def sanitized(msg: Message) -> str:
    """The message as one line of text with every csi_secret field replaced by a marker."""
    copy = type(msg)()
    copy.CopyFrom(msg)
    _strip(copy)
    return str(text_format.MessageToString(copy, as_one_line=True))


def _strip(msg: Message) -> None:
    for field, value in list(msg.ListFields()):
        if _is_secret(field):
            msg.ClearField(field.name)
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                getattr(msg, field.name)["stripped"] = STRIPPED
            elif field.type == field.TYPE_STRING and field.is_repeated:
                getattr(msg, field.name).append(STRIPPED)
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            for sub in value if field.is_repeated else [value]:
                _strip(sub)


def rpc(fn: Method[Req, Resp]) -> Method[Req, Resp]:
    """Wrap a servicer method: log it (sanitized), map CsiError to its status, hide crashes."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(self: Any, request: Req, context: grpc.ServicerContext) -> Resp:
        t0 = time.perf_counter()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s request: %s", name, sanitized(request))
        try:
            response = fn(self, request, context)
        except CsiError as e:
            log.info("%s failed: %s: %s", name, e.status.name, e.msg, extra={"rpc": name})
            context.abort(e.status, e.msg)
        except Exception:
            log.exception("%s crashed; request: %s", name, sanitized(request), extra={"rpc": name})
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        log.debug("%s ok in %.1f ms", name, (time.perf_counter() - t0) * 1000, extra={"rpc": name})
        return response

    return wrapper

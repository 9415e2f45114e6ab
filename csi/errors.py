"""Errors of the CSI driver, each carrying the gRPC status code the CSI spec prescribes.

Only the `@rpc` edge (csi/rpc.py) turns them into a gRPC status; everything below
raises these and never touches grpc.ServicerContext.
"""

from __future__ import annotations

from typing import ClassVar

import grpc


class CsiError(Exception):
    status: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class InvalidArgument(CsiError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(CsiError):
    status = grpc.StatusCode.NOT_FOUND


class VolumeNotFound(NotFound):
    def __init__(self, volume_id: str) -> None:
        super().__init__(f"volume {volume_id!r} does not exist")


class SnapshotNotFound(NotFound):
    def __init__(self, snapshot_id: str) -> None:
        super().__init__(f"snapshot {snapshot_id!r} does not exist")


class GroupSnapshotNotFound(NotFound):
    def __init__(self, group_id: str) -> None:
        super().__init__(f"group snapshot {group_id!r} does not exist")


class NodeNotFound(NotFound):
    def __init__(self, node_id: str) -> None:
        super().__init__(f"node {node_id!r} is not known to this backend")


class AlreadyExists(CsiError):
    status = grpc.StatusCode.ALREADY_EXISTS


class OutOfRange(CsiError):
    status = grpc.StatusCode.OUT_OF_RANGE


class ResourceExhausted(CsiError):
    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(CsiError):
    status = grpc.StatusCode.FAILED_PRECONDITION


class OperationPending(CsiError):
    """Another call on the same volume/name is in flight (CSI: ABORTED, the CO retries)."""

    status = grpc.StatusCode.ABORTED


class InvalidToken(CsiError):
    """A starting_token this driver never handed out (CSI: ABORTED)."""

    status = grpc.StatusCode.ABORTED


class BackendUnavailable(CsiError):
    status = grpc.StatusCode.UNAVAILABLE


class BackendUnauthenticated(CsiError):
    """The storage service refused the driver's IAM token (gRPC UNAUTHENTICATED, passed on with the
    service's reason: the call is not retried until the token is fixed)."""

    status = grpc.StatusCode.UNAUTHENTICATED


class Unimplemented(CsiError):
    status = grpc.StatusCode.UNIMPLEMENTED


class CommandFailed(CsiError):
    """An external tool (mount, mkfs, losetup, ...) failed; answered INTERNAL with its stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)} exited {returncode}: {stderr.strip()[:500]}")
        self.argv, self.returncode, self.stderr = argv, returncode, stderr

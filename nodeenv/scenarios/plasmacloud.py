"""PlasmaCloud's gRPC services take TLS and an IAM token on every call: the cluster's LightningStor
(the one the CSI plugins use; on one node a LightningStor double started for these steps) answers
a call carrying the platform's token, and refuses a call without a token, one with an expired
token and one signed by another key with UNAUTHENTICATED, and a plaintext client at the TLS
handshake."""

from __future__ import annotations

import grpc

from common.plasmacloud_grpc import PlasmaCloudAuth, secure_channel
from nodeenv.lightningstor import serve
from nodeenv.plasmacloud_auth import DevPki, ensure_dev_pki
from nodeenv.scenario import Scenario
from protos import lightningstor_pb2 as ls
from protos import lightningstor_pb2_grpc as ls_grpc

STEP = "plasmacloud:"


def _list(channel: grpc.Channel) -> grpc.StatusCode:
    try:
        ls_grpc.VolumeServiceStub(channel).ListVolumes(ls.ListVolumesRequest(page_size=1), timeout=5)
    except grpc.RpcError as e:
        return e.code()
    finally:
        channel.close()
    return grpc.StatusCode.OK


def _no_token(endpoint: str, auth: PlasmaCloudAuth) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(root_certificates=auth.ca.read_bytes())
    return grpc.secure_channel(endpoint, creds, options=auth.options(endpoint))


def _expect(code: grpc.StatusCode, want: grpc.StatusCode, what: str) -> str:
    if code != want:
        raise RuntimeError(f"{what}: {code.name}, not {want.name}")
    return str(code.name)


def run(scn: Scenario) -> None:
    endpoint, on = scn.env.get("LIGHTNINGSTOR_ENDPOINT", ""), ""  # calls from the control part
    if endpoint:
        auth = PlasmaCloudAuth.from_env(scn.env)
        pki = DevPki(auth.token_file.parent)
    else:  # one node: a LightningStor double of its own, for these steps
        pki = ensure_dev_pki(scn.node.path("plasmacloud", "x").parent)
        server, _, endpoint = serve(scn.node.path("plasmacloud-ls", "x").parent, [], pki)
        scn.defer(lambda: server.stop(None))
        auth = pki.client_auth()
    with scn.step(f"{STEP} LightningStor answers the platform's IAM token over TLS", on=on) as r:
        r.detail = _expect(_list(secure_channel(endpoint, auth)), grpc.StatusCode.OK, "with a token")
    with scn.step(f"{STEP} a call without a token refused", on=on) as r:
        code = _list(_no_token(endpoint, auth))
        r.detail = _expect(code, grpc.StatusCode.UNAUTHENTICATED, "without a token")
    bad = pki.dir / "expired-token"
    scn.defer(lambda: bad.unlink(missing_ok=True))
    with scn.step(f"{STEP} an expired token refused", on=on) as r:
        bad.write_text(pki.mint(ttl=-600))
        code = _list(secure_channel(endpoint, pki.client_auth(bad)))
        r.detail = _expect(code, grpc.StatusCode.UNAUTHENTICATED, "an expired token")
    with scn.step(f"{STEP} a token for another audience refused", on=on) as r:
        bad.write_text(pki.mint(audience="k8shost"))
        code = _list(secure_channel(endpoint, pki.client_auth(bad)))
        r.detail = _expect(code, grpc.StatusCode.UNAUTHENTICATED, "another audience")
    with scn.step(f"{STEP} a plaintext client refused at the TLS handshake", on=on) as r:
        code = _list(grpc.insecure_channel(endpoint))
        r.detail = _expect(code, grpc.StatusCode.UNAVAILABLE, "plaintext")

"""A Kubernetes API test double (no kube-apiserver can run on these machines).

It serves the real REST paths and JSON over HTTPS with bearer tokens, so kubectl, the official
`kubernetes` client and kubernetes_asyncio talk to it as to kube-apiserver. Each module's docstring
says what is faithful and what is simplified:

  kinds.py        the registry of kinds (one row per kind)      store.py      objects, resourceVersion,
  objects.py      metadata rules (uid, generation, ...)                       history, watch fan-out
  crud.py         verbs' semantics, finalizers, namespaces       paging.py     limit/continue
  services.py     Service defaulting, ClusterIP/NodePort         allocator.py  the IP/port bitmaps
  selectors.py    label and field selectors                      patches.py    merge/JSON/strategic
  patchmeta.py    strategic-merge list keys                      apply.py      server-side apply
  watchstream.py  the watch protocol (bookmarks, 410)            tables.py     kubectl's Tables
  discovery.py    /api, /apis, /version                          openapi.py    /openapi/v2, /openapi/v3
  routing.py      path -> RequestInfo                            handlers.py   one function per verb
  scale.py        the /scale subresource (autoscaling/v1 Scale)
  auth.py         tokens -> users, the request record            audit.py      recording each request
  rbac.py         opt-in RBAC authorization                      app.py        the aiohttp app
  views.py        Events served by two groups, one storage       reviews.py    SelfSubject(Access)Reviews
  defaults.py     create-time defaulting (Pods, Secrets, ...)    protobuf.py   protobuf bodies kubectl sends
  metrics.py      /metrics                                        settings.py   the daemon's flags and env
  validation.py   ObjectMeta + EndpointSlice validation (422)  quota.py      opt-in ResourceQuota counts
  strict.py       fieldValidation=Strict (top level, metadata)
  strategies.py   per-kind defaults/validation dispatch          workloads.py  apps/v1, batch/v1 rules
  podtemplate.py  pod template defaults and rules                storagekinds.py storage.k8s.io rules
  crds.py         CRDs: rules, status, the kinds they serve      crschema.py   custom resources vs schema
  openapiv2pb.py  /openapi/v2 as protobuf (kubectl's fallback)  protobuf_json.py protobuf -> JSON form
  serviceaccounts.py  default ServiceAccounts   apiservices.py  APIServices   replicationcontrollers.py
  state.py        settings (ApiConfig), faults                   server.py     HTTPS server, threaded runner
  devpki.py       dev serving cert, kubeconfigs                  __main__.py   the daemon

Tests use the `kube_api` fixture (tests/kubeapi_fixture.py); `make node-up` runs the daemon
(nodeenv/kubeapi_component.py).
"""

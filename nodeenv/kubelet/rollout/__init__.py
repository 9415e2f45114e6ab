"""kube-controller-manager's workload controllers as the runner plays them: each module plans one
kind's pass as pure functions over the objects it reads (a `Plan` of creates, deletes, patches and
status writes), sync.py lists the cluster and applies the plans through the API.

  plan.py         the Plan, and what the controllers share (ownership, readiness, IntOrString)
  revisions.py    template hashes and ControllerRevisions (DaemonSets, StatefulSets)
  replicasets.py  ReplicaSet -> Pods, ReplicaSet status
  deployments.py  Deployment -> ReplicaSets (RollingUpdate, Recreate, revisions, history), status
  daemonsets.py   DaemonSet -> a Pod per Node, rolling update, status
  statefulsets.py StatefulSet -> ordered members, rolling update, status
  sync.py         one pass over the cluster (and the garbage collector's part for these kinds)
"""

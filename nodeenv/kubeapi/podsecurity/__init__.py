"""kube-apiserver's PodSecurity admission (k8s.io/pod-security-admission), written for the double.

levels.py: the namespace labels → a policy (enforce/audit/warn level and version, with defaults).
spec.py: reading a PodSpec (JSON) the way the checks do; visiting its containers.
baseline.py, restricted.py: the Pod Security Standards' checks, pure functions per check.
registry.py: which checks make a level at a version; the aggregate message.
config.py: the PodSecurityConfiguration (defaults, exemptions) kube-apiserver reads from its
AdmissionConfiguration file. admission.py: the decisions for Pods, workloads and Namespaces.
"""

"""The one OVN/OVSDB access layer the CNI agent and the controllers share (ovsdbapp underneath).

A component says *what* it writes (a port, a load balancer, an ACL) as an ovsdbapp command or
transaction on an API object from `connect()`; how the database is reached lives here:

- `remotes`: the remote list of a database as OVN's tools take it (`tcp:`/`ssl:`/`unix:`,
  comma-separated: every member of a RAFT cluster), checked once at the edge;
- `connection`: one connection per object (ovsdbapp's is class-wide), clustered databases
  monitored and written through their leader only, reconnecting to the next member;
- `retry`: every transaction retried with backoff while the database is unreachable or in an
  election, each retry logged, and never two attempts of one transaction in flight;
- `watch`: row updates matched against callers waiting for them (no polling);
- `commands`: read commands and row lookups on the IDL replica.

The only importer of ovsdbapp in the suite (python-ovs `ovs.*` too, apart from `remotes`,
which is stdlib only so settings can check remotes without importing ovsdbapp).
"""

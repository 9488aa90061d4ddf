"""``odradek verify``, the pure half: the history model, the nemesis schedule from a
seed, the scenarios, the packet-filter rules of a network state, and the verdict.

Nothing here touches a process, a socket or a file; ``odradek.cli.verify`` runs the
namespace, the nodes, the clients and the faults and hands their history to
:func:`odradek.verify.checker.judge`.
"""

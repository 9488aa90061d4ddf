"""Security's protocol rules, pure: who a client is (principals from certificates and
the mapping rules), and, as they come, authentication exchanges and authorization.

It may import ``core`` and ``protocol`` only; the TLS sockets and key stores live in
:mod:`odradek.shell.tls`.
"""

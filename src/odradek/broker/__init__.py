"""Request handlers: a decoded request and the node's state in, a response and effects out.

No awaits here: the shell calls these and does the I/O.
"""

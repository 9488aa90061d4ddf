"""The only layer with asyncio, sockets, real files, the wall clock and signals."""

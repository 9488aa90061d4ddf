"""The storage engine: segmented partition logs, indexes, checkpoints and recovery.

Every file is reached through :class:`odradek.storage.fs.FileSystem`, so the same code
runs on real disks (``odradek.shell.real_fs``) and on the simulator's disk
(``odradek.testing.sim_disk``), where unsynced writes are lost or torn on a crash.
"""

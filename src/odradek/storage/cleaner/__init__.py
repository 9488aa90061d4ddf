"""Log compaction: the log cleaner of a ``cleanup.policy=compact`` log (ADR 0024).

The cleaner keeps at least the last value of every key and keeps offsets: a record
keeps its offset after cleaning, and the offsets an emptied range held are covered by
record-less batches, so the log stays dense batch by batch and recovery, the scrub and
followers check offsets exactly as before. Its parts, each apart because it runs in a
different place:

* :mod:`.offset_map`: the map from each key to its last offset in the dirty section;
* :mod:`.batches`: one batch rewritten without what the map supersedes (pure bytes);
* :mod:`.plan`: which log is cleaned next and up to where (pure, over segment sizes);
* :mod:`.cleaning`: one pass over a log's files, run on a worker thread, that writes
  the cleaned segments beside the originals;
* :mod:`.swap`: the cleaned segments swapped in (Kafka's ``.cleaned``/``.swap``
  protocol), and start-up finishing or rolling back a swap a crash interrupted.
"""

"""Storage: what every suite writes and reads back. The records (records/: the sample and model records of the
live runs, their fields and schema), the transcripts they are appended to (transcript_writer.py: fsynced lines,
locks, a torn last line set aside) and read back from (transcripts.py), the results folder's layout (results.py: ResultsDir) and the reading that counts a
copied file or question once (counted_once.py). It sits above grammar (a sample record names its grammar's setup)
and below evaluation, which judges what it holds."""

"""Small utilities shared by every wing: atomic, escape-checked file writes
(:mod:`.files`), content hashes (:mod:`.hashing`) and progress bars (:mod:`.progress`)."""

"""Data the predictor learns from: the twin corpora (:mod:`.corpora`), real measurements
imported from public releases (:mod:`.real_data`) and batch-size efficiency vectors
(:mod:`.batch_efficiency`)."""

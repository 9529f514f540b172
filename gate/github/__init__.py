"""The GitHub side of the gate: the Actions context, REST calls, baseline, comment, check run."""

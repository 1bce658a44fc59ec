"""What the engineer on call runs: status, verify, recover, reset-offsets, bind."""

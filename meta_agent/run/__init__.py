"""Running rounds: options, state, the loop and recovery."""

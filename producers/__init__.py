"""What an agent runtime imports: build a capture, hash, sign, decide its level, emit."""

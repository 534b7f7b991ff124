"""``blackbox demo``: a small tool-using support agent, a planted failure, and the whole story end to end."""

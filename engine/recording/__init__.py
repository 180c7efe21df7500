"""Recording runs to cassettes and replaying them: the replay model serves recorded turns,
tool results and decisions with no network and no side effects."""

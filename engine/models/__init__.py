"""Adapters of the model port (`loopstate.engine.model`): litellm for every provider, a scripted
model for tests, and a retrying wrapper. Only `litellm` and its helpers import litellm."""

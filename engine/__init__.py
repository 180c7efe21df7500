"""The runtime: messages, run state, events, ports and adapters, approval, execution, stores."""

"""The application layer: a command's typed request, run end to end.

cli/ parses flags into a request (`generate.GenerateRequest`, `compare.CompareRequest`) and
hands it here with a `report.Reporter`, through which everything meant for a person goes: this
layer never prints. Below it are the engine, the serving dialects, the backends and the rest.
"""

"""REST API under ``/api/v1``: thin routers over ``service.queries`` plus shared dependencies.

Routers only parse input and map errors; numbers come from the query functions the dashboard also uses.
"""

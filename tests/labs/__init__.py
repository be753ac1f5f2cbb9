"""Labs that are not the ticket lab, for the tests of the pluggable engine."""

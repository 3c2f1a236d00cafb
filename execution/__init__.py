"""Graders that run untrusted code: the program grader (code domain)."""

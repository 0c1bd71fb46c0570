"""Shared plumbing for chexstack's areas (envs/, images/, validate/, trainer/, launch/, bench/).

Only what several areas need lives here: the user-facing error type and the console. The trainer does not
import it (it runs alone inside the stack images, on Python 3.5).
"""

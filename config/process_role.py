"""What kind of process this is, for the settings to read: set by an entry point before Django
reads its settings (config/asgi.py marks the web server's processes). A module attribute, not
an environment variable, so a process the web server starts is not taken for one."""

WEB = "web"
role = ""

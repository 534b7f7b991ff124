"""The app room: the services' settings (:mod:`.settings`), the one runtime context every command and
the demo open (:mod:`.runtime`), and the ingest process entry (:mod:`.ingest`)."""

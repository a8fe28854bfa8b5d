# Made from src/r/wire/protocol-table.ts by `npm run gen`: edit the table there, not this file.
# A frame: its letter, the payload's length (uint32, big endian), the payload: its fields, each a text
# ended by a NUL, in the order of <frame>_fields (a frame of one field is that field), then its body.
header_bytes <- 5L
# R reads a socket 4096 bytes at a time: a request frame up to this size is taken in one read, even
# behind a drain frame.
one_read <- 4091L
# Where an isolated session leaves its proof, in its home.
proof_file <- ".rock-proof"
# The FIFO large values go through, in a session's home.
value_pipe <- ".value-pipe"
# Node -> the R server (control socket)
to_server_fork <- "F" # fork a session (answered by forked or forkFailed)
to_server_fork_fields <- c("token", "work_dir", "tmp_dir")
to_server_fork_as <- "I" # fork a session that confines itself and becomes uid/gid before it connects (an isolated server forks no other)
to_server_fork_as_fields <- c("token", "work_dir", "tmp_dir", "uid", "gid", "memory_bytes", "processes", "private_tmp", "network", "link", "filesystem")
to_server_ping <- "P" # answered by pong
to_server_version <- "Q" # R.version (a plain list for JSON); field: format
# The R server -> Node (control socket)
from_server_ready <- "S" # greeting: the server started
from_server_ready_fields <- c("token", "version", "pid")
from_server_refused <- "N" # greeting: the server cannot start, and why
from_server_refused_fields <- c("token", "error")
from_server_forked <- "K" # the session's pid; field: pid
from_server_fork_failed <- "Y" # why no session was forked; field: error
from_server_pong <- "G" # the answer to ping
from_server_version <- "U" # R.version; body: JSON text or R serialization, as asked
# Node -> a session (main socket)
to_session_eval_json <- "E" # evaluate, answer JSON; body: the script (UTF-8)
to_session_eval_rds <- "R" # evaluate, answer R serialization; body: the script (UTF-8)
to_session_live_json <- "L" # evaluate live, answer JSON; body: the script (UTF-8)
to_session_live_rds <- "B" # evaluate live, answer R serialization; body: the script (UTF-8)
to_session_eval_piped <- "J" # evaluate, answer R serialization: a large value through the session's value pipe (piping, then an empty value); body: the script (UTF-8)
to_session_assign <- "A" # assign the value of the body to symbol; body: the script (UTF-8), the R serialization, or the path of the FIFO it comes through
to_session_assign_fields <- c("source", "symbol")
to_session_drain <- "D" # consume a SIGINT that landed after the evaluation it aimed at; not answered
to_session_save <- "Z" # save the session's state into path, the process living on (answered by json: what could not be saved); field: path
to_session_restore <- "H" # restore the state saved in path, before any other request (answered by an empty value, or an error); field: path
to_session_signalled <- "g" # the answer to a session's signal: startTime when Node granted it and sent the signal, empty when refused; field: start_time
# A session -> Node (main and output sockets)
from_session_main <- "C" # greeting of the main socket
from_session_main_fields <- c("token", "pid", "proof")
from_session_output <- "O" # greeting of the output socket, which then carries printed text and markers
from_session_output_fields <- c("token", "proof")
from_session_value <- "V" # a value: R serialization, or nothing (an assignment); body: the value
from_session_json <- "T" # a value as JSON; field: json
from_session_piping <- "p" # the value is being written into the value pipe (open it to read); its end comes after
from_session_error <- "X" # the request failed; field: error
from_session_message <- "M" # a message of a live evaluation; field: text
from_session_warning <- "W" # a warning of a live evaluation; field: text
from_session_signal <- "k" # during an evaluation: send signal to pid, a process the session cannot signal itself (answered by signalled)
from_session_signal_fields <- c("pid", "signal", "start_time")
# Markers on a session's output stream: a byte printed text never holds, then the marker's type.
marker_eval <- as.raw(c(0L, 0L))
marker_sync <- as.raw(c(0L, 1L))
marker_start <- as.raw(c(0L, 2L))
# The words of the fields that hold one of a few, by name.
network_words <- c(host = "host", none = "none", restricted = "restricted")
filesystem_words <- c(minimal = "minimal", host = "host")
format_words <- c(json = "json", rds = "rds")
source_words <- c(script = "script", rdata = "rdata", stream = "stream")
signal_words <- c(none = "none", TERM = "TERM", KILL = "KILL", INT = "INT")

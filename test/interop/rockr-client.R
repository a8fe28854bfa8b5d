# rockr, the R client of the interface (from CRAN, unchanged), against a running server.
# Each check prints "ok <name>"; the first failure stops the script with a non-zero status.
suppressPackageStartupMessages(library(rockr))

url <- Sys.getenv("ROCK_URL")
part <- Sys.getenv("ROCKR_PART", "session")
check <- function(name, cond) {
  if (!isTRUE(cond)) stop("check failed: ", name, call. = FALSE)
  cat("ok", name, "\n")
}

conn <- rockr.connect(username = "admin", password = "admin", url = url)

if (part == "session") {
  rockr.open(conn)
  check("open gives a session", is.character(conn$session$id) && conn$session$subject == "admin")
  check("sessions lists it", conn$session$id %in% vapply(rockr.sessions(conn), function(s) s$id, ""))
  check("session by id", rockr.session(conn, conn$session$id)$id == conn$session$id)

  check("eval raw", identical(rockr.eval(conn, quote(1 + 1)), 2))
  check("eval raw of a data.frame", identical(rockr.eval(conn, quote(head(mtcars, 3))), head(mtcars, 3)))
  check("eval json", identical(rockr.eval(conn, "c(a = 1, b = 2)", json = TRUE), list(a = 1L, b = 2L)) ||
        identical(unlist(rockr.eval(conn, "c(a = 1, b = 2)", json = TRUE)), c(a = 1L, b = 2L)) ||
        identical(rockr.eval(conn, "list(a = 1)", json = TRUE)$a, 1L))

  rockr.assign(conn, "x", 1:10)
  check("assign data", identical(rockr.eval(conn, quote(x)), 1:10))
  df <- data.frame(n = c(1.5, NA), s = c("a", "b"))
  rockr.assign(conn, "df", df)
  check("assign data.frame", identical(rockr.eval(conn, quote(df)), df))
  rockr.assign(conn, "y", quote(x * 2L))
  check("assign expression", identical(rockr.eval(conn, quote(y)), 1:10 * 2L))

  err <- tryCatch(rockr.eval(conn, quote(stop("boom"))), error = function(e) conditionMessage(e))
  check("R error reaches the client with its message", grepl("boom", err))

  cmd <- rockr.eval(conn, quote({ Sys.sleep(0.3); 42 }), async = TRUE)
  check("async eval gives a command", !is.null(cmd$id) && cmd$status %in% c("PENDING", "IN_PROGRESS"))
  done <- rockr.command(conn, cmd$id, wait = TRUE)
  check("command wait", done$status == "COMPLETED" && isTRUE(done$finished))
  cmds <- rockr.commands(conn)
  check("commands data.frame", is.data.frame(cmds) && cmd$id %in% cmds$id)
  check("command result", identical(rockr.command_result(conn, cmd$id, wait = TRUE), 42))
  check("result removed after rm", !(cmd$id %in% rockr.commands(conn)$id))
  acmd <- rockr.assign(conn, "z", 5, async = TRUE)
  rockr.command(conn, acmd$id, wait = TRUE)
  check("async assign", identical(rockr.eval(conn, quote(z)), 5))
  rockr.command_rm(conn, acmd$id)
  check("command removed", !(acmd$id %in% rockr.commands(conn)$id))

  src <- tempfile(fileext = ".csv")
  write.csv(head(iris), src, row.names = FALSE)
  rockr.file_upload(conn, src, "data/iris.csv")
  check("uploaded file readable in the session", identical(nrow(rockr.eval(conn, quote(read.csv("data/iris.csv")))), 6L))
  err <- tryCatch({ rockr.file_upload(conn, src, "data/iris.csv"); "no error" }, error = function(e) conditionMessage(e))
  check("upload refuses to overwrite", grepl("File exists and cannot be overridden", err))
  rockr.file_upload(conn, src, "data/iris.csv", overwrite = TRUE)
  rockr.file_upload(conn, src, "t.csv", temp = TRUE)
  check("temp upload in tempdir()", isTRUE(rockr.eval(conn, quote(file.exists(file.path(tempdir(), "t.csv"))))))
  dst <- tempfile(fileext = ".csv")
  rockr.file_download(conn, "data/iris.csv", dst)
  check("download gives the same bytes", identical(readBin(dst, "raw", 1e6), readBin(src, "raw", 1e6)))
  err <- tryCatch({ rockr.file_download(conn, "../../x", tempfile()); "no error" }, error = function(e) conditionMessage(e))
  check("download outside the session refused", grepl("not valid|does not exist", err))

  status <- rockr.status(conn)
  check("server status", isTRUE(status$running) && status$sessions$total >= 1)
  check("version", !is.null(rockr.version(conn)))
  log <- rockr.log(conn, 50)
  check("log lines", is.character(log))
  rockr.close(conn)
  check("close", is.null(conn$session))

  # Stopping and starting the R server is an operation on one node: behind a load balancer
  # (ROCKR_BALANCED=1) each call may reach another node, so it is asked of a node directly instead.
  if (Sys.getenv("ROCKR_BALANCED") != "1") {
    rockr.stop(conn)
    check("stopped", identical(rockr.status(conn)$running, FALSE))
    rockr.start(conn)
    check("started", isTRUE(rockr.status(conn)$running))
  }
  rockr.open(conn)
  check("session after restart", identical(rockr.eval(conn, quote(sum(1:4))), 10L))
  rockr.close(conn)
}

if (part == "packages") {
  rockr.package_install(conn, "plainPkg")
  pkgs <- rockr.packages(conn)
  check("packages matrix", "plainPkg" %in% rownames(pkgs))
  desc <- rockr.package(conn, "plainPkg")
  check("package description", identical(desc$name, "plainPkg") || identical(desc[["Package"]], "plainPkg"))
  rockr.package_install(conn, "dsTestA")
  rockr.package_install(conn, "dsTestB")
  ds <- rockr.packages_datashield(conn)
  check("datashield settings", all(c("dsTestA", "dsTestB") %in% names(ds)))
  rockr.package_install(conn, "gitPkg", ref = "v2", manager = "github")
  check("git install", "gitPkg" %in% rownames(rockr.packages(conn)))
  rockr.package_rm(conn, "plainPkg")
  check("package removed", !("plainPkg" %in% rownames(rockr.packages(conn))))
  rockr.packages_rm(conn, c("dsTestA", "dsTestB"))
  left <- rownames(rockr.packages(conn))
  check("packages removed", !any(c("dsTestA", "dsTestB") %in% left))
}
# A session that outlives its process: the test suspends it, then restarts the server, each time once
# this script has said it waits ("waiting <n>") and then writes the file ROCKR_GO/<n>; the same
# connection (its session id) goes on with every value.
if (part == "survive") {
  go <- Sys.getenv("ROCKR_GO")
  wait_for <- function(n) {
    cat("waiting", n, "\n")
    flush(stdout())
    while (!file.exists(file.path(go, n))) Sys.sleep(0.05)
  }
  rockr.open(conn)
  cat("session", conn$session$id, "\n")
  rockr.assign(conn, "cars", mtcars)
  rockr.eval(conn, quote({ set.seed(11); library(stats4); NULL }))
  draws <- local({ set.seed(11); runif(2) })
  wait_for(1)
  check("assigned data after a suspend", identical(rockr.eval(conn, quote(cars)), mtcars))
  check("random numbers go on after a suspend", identical(rockr.eval(conn, quote(runif(1))), draws[1]))
  wait_for(2)
  check("assigned data after a restart", identical(rockr.eval(conn, quote(cars)), mtcars))
  check("random numbers go on after a restart", identical(rockr.eval(conn, quote(runif(1))), draws[2]))
  check("packages after a restart", isTRUE(rockr.eval(conn, quote("package:stats4" %in% search()))))
  check("listed after a restart", conn$session$id %in% vapply(rockr.sessions(conn), function(s) s$id, ""))
  rockr.close(conn)
  check("close", is.null(conn$session))
}
cat("done\n")

/**
 * The one fixed R script every package operation runs. Nothing a caller sends is ever part of it:
 * the operation and its (already validated) arguments arrive as ROCK_PKG_* environment variables.
 * The script writes its result to ROCK_PKG_OUT and, on failure, a kind line plus R's message to
 * ROCK_PKG_ERROR before quitting with status 3, so R's console output stays free for the log.
 */
export const PACKAGE_SCRIPT = String.raw`
local({
  env <- function(name) Sys.getenv(name, unset = "")
  env_lines <- function(name) {
    value <- env(name)
    if (nzchar(value)) strsplit(value, "\n", fixed = TRUE)[[1]] else character(0)
  }
  op <- env("ROCK_PKG_OP")
  out_file <- env("ROCK_PKG_OUT")
  error_file <- env("ROCK_PKG_ERROR")

  fail <- function(kind, message) {
    writeLines(c(kind, enc2utf8(message)), error_file, useBytes = TRUE)
    quit(save = "no", status = 3)
  }
  write_json <- function(x) {
    json <- jsonlite::toJSON(x, auto_unbox = FALSE, null = "null", na = "null", digits = NA)
    writeLines(enc2utf8(as.character(json)), out_file, useBytes = TRUE)
  }
  write_rds <- function(x) writeBin(serialize(x, NULL), out_file)

  setup_lib <- env("ROCK_PKG_SETUP_LIB")
  if (nzchar(setup_lib) && dir.exists(setup_lib)) .libPaths(c(.libPaths(), setup_lib))
  lib <- env("ROCK_PKG_LIB")
  if (nzchar(lib)) {
    dir.create(lib, recursive = TRUE, showWarnings = FALSE)
    lib <- normalizePath(lib)
    # Listed first so what is installed there shadows other libraries and is what R reads.
    .libPaths(c(lib, .libPaths()))
  } else {
    lib <- .libPaths()[1]
  }
  # Where R CMD INSTALL takes its locks, for Node to clear the ones a stopped operation leaves.
  writeLines(lib, env("ROCK_PKG_LIBRARY_FILE"))
  repos <- env_lines("ROCK_PKG_REPOS")
  if (length(repos) == 0) repos <- getOption("repos")
  repos <- repos[nzchar(repos) & repos != "@CRAN@"]
  format <- env("ROCK_PKG_FORMAT")

  installed_version <- function(pkg) {
    if (!file.exists(file.path(lib, pkg, "DESCRIPTION"))) return(NA_character_)
    as.character(utils::packageDescription(pkg, lib.loc = lib, fields = "Version"))
  }

  # install.packages reports most failures as warnings only.
  failure_warning <- "non-zero exit status|is not available|download of package .* failed"
  with_warnings <- function(expr) {
    warnings <- character(0)
    value <- withCallingHandlers(expr, warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
    })
    list(value = value, warnings = warnings,
         failures = warnings[grepl(failure_warning, warnings)])
  }

  split_setting <- function(value) {
    items <- trimws(strsplit(gsub("[\r\n]", "", value), ",", fixed = TRUE)[[1]])
    items[nzchar(items)]
  }

  run <- function() {
    if (op == "list") {
      fields <- c("Title", "Description", "Author", "Maintainer", "Date/Publication",
                  "AggregateMethods", "AssignMethods", "Options")
      m <- utils::installed.packages(fields = fields)
      if (format == "rds") return(write_rds(m))
      rows <- lapply(seq_len(nrow(m)), function(i) unname(m[i, ]))
      return(write_json(list(rowNames = I(unname(rownames(m))), columnNames = I(colnames(m)), rows = rows)))
    }

    if (op == "describe") {
      name <- env("ROCK_PKG_NAME")
      description <- suppressWarnings(utils::packageDescription(name))
      if (!inherits(description, "packageDescription")) fail("notfound", paste0("No such R package: ", name))
      x <- c(list(name = name), lapply(unclass(description), as.character))
      attributes(x) <- list(names = names(x))
      if (format == "rds") return(write_rds(x))
      return(writeLines(enc2utf8(as.character(
        jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null"))), out_file, useBytes = TRUE))
    }

    if (op == "settings") {
      fields <- c("AggregateMethods", "AssignMethods", "Options")
      m <- utils::installed.packages(fields = fields)
      settings <- list()
      for (i in seq_len(nrow(m))) {
        pkg <- m[i, "Package"]
        # The first library wins, as it does for library().
        if (!is.null(settings[[pkg]])) next
        entry <- list()
        for (field in fields) {
          if (!is.na(m[i, field])) entry[[field]] <- split_setting(m[i, field])
        }
        file <- file.path(m[i, "LibPath"], pkg, "DATASHIELD")
        if (file.exists(file)) {
          dcf <- read.dcf(file)
          for (field in colnames(dcf)) {
            if (!is.na(dcf[1, field])) entry[[field]] <- split_setting(dcf[1, field])
          }
        }
        if (length(entry) > 0) settings[[pkg]] <- entry
      }
      if (format == "rds") return(write_rds(settings))
      if (length(settings) == 0) return(writeLines("{}", out_file))
      return(write_json(settings))
    }

    if (op == "install") {
      name <- env("ROCK_PKG_NAME")
      source <- env("ROCK_PKG_SOURCE")
      where <- switch(source, archive = "the package archive", git = "git", collection = "the collection", source)
      result <- tryCatch(with_warnings(switch(source,
        archive = utils::install.packages(name, repos = repos, lib = lib),
        collection = BiocManager::install(name, ask = FALSE, update = FALSE, lib = lib),
        git = {
          ref <- env("ROCK_PKG_REF")
          if (env("ROCK_PKG_GIT_MODE") == "git") {
            remotes::install_git(env("ROCK_PKG_GIT_URL"), ref = ref, upgrade = FALSE, lib = lib)
          } else {
            remotes::install_github(name, ref = ref, host = env("ROCK_PKG_GIT_API"), upgrade = FALSE, lib = lib)
          }
        },
        stop("unknown package source: ", source))),
        error = function(e) {
          fail("error", paste0("Package '", name, "' could not be installed from ", where, ": ", conditionMessage(e)))
        })
      pkg <- env("ROCK_PKG_PACKAGE")
      if (source == "git") {
        value <- result$value
        # remotes swallows a failed download or build with try() and answers NA; only warnings remain.
        if (!is.character(value) || length(value) != 1 || is.na(value) || !nzchar(value)) {
          reason <- result$warnings
          if (length(reason) == 0) reason <- "remotes did not install it"
          fail("error", paste0("Package '", name, "' could not be installed from ", where, ": ", paste(reason, collapse = "; ")))
        }
        # The name in the package's DESCRIPTION, which may differ from the repository's.
        pkg <- value
      }
      version <- installed_version(pkg)
      if (length(result$failures) > 0 || is.na(version)) {
        reason <- if (length(result$failures) > 0) result$failures else result$warnings
        if (length(reason) == 0) reason <- "it is not installed afterwards"
        fail("error", paste0("Package '", pkg, "' could not be installed from ", where, ": ", paste(reason, collapse = "; ")))
      }
      return(write_json(list(name = jsonlite::unbox(pkg), version = jsonlite::unbox(version))))
    }

    if (op == "update") {
      # As Rock: a package that fails (to download, to build) leaves the others updated and the
      # operation answered; its failure is named rather than an error of the whole update.
      available <- utils::available.packages(repos = repos)
      old <- utils::old.packages(repos = repos, available = available)
      if (is.null(old)) return(write_json(list(updated = I(character(0)), failed = I(character(0)))))
      utils::update.packages(oldPkgs = old, available = available, ask = FALSE, repos = repos, instlib = lib)
      names <- unique(unname(old[, "Package"]))
      newer <- vapply(names, function(pkg) {
        version <- installed_version(pkg)
        !is.na(version) && package_version(version) >= package_version(old[match(pkg, old[, "Package"]), "ReposVer"])
      }, logical(1))
      failed <- names[!newer]
      if (length(failed) > 0) message("Packages that could not be updated: ", paste(failed, collapse = ", "))
      return(write_json(list(updated = I(names[newer]), failed = I(failed))))
    }

    if (op == "remove") {
      names <- env_lines("ROCK_PKG_NAMES")
      present <- names[file.exists(file.path(lib, names, "DESCRIPTION"))]
      if (length(present) > 0) utils::remove.packages(present, lib = lib)
      return(write_json(list(removed = I(present), missing = I(setdiff(names, present)))))
    }

    stop("unknown package operation: ", op)
  }

  tryCatch(run(), error = function(e) fail("error", conditionMessage(e)))
  invisible(NULL)
})
`;

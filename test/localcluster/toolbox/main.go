// Command toolbox is the image of the local cluster's own tests: a few small tools in one
// static binary (the etcd images have no shell), chosen by the first argument.
//
//	toolbox serve ADDR DIR   serve DIR over HTTP on ADDR; /healthz answers 200
//	toolbox cat FILE...      print files
//	toolbox write FILE TEXT  write TEXT to FILE
//	toolbox sleep SECONDS    sleep, exiting 0 on SIGTERM
//	toolbox exit CODE        exit with CODE
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: toolbox serve|cat|write|sleep|exit ...")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		need(args, 2)
		serve(args[0], args[1])
	case "cat":
		for _, f := range args {
			data, err := os.ReadFile(f)
			if err != nil {
				fail(err.Error())
			}
			_, _ = os.Stdout.Write(data)
		}
	case "write":
		need(args, 2)
		if err := os.WriteFile(args[0], []byte(args[1]), 0o644); err != nil {
			fail(err.Error())
		}
	case "sleep":
		need(args, 1)
		sleep(args[0])
	case "exit":
		need(args, 1)
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	default:
		fail("unknown tool " + os.Args[1])
	}
}

func serve(addr, dir string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	fmt.Println("serving", dir, "on", addr)
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		_ = server.Close()
	}()
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fail(err.Error())
	}
}

func sleep(arg string) {
	seconds, err := strconv.Atoi(arg)
	if err != nil {
		fail(err.Error())
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case <-time.After(time.Duration(seconds) * time.Second):
	}
}

func need(args []string, n int) {
	if len(args) < n {
		fail(fmt.Sprintf("%s needs %d arguments", os.Args[1], n))
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "toolbox:", msg)
	os.Exit(1)
}

// Command toolbox is the image of the local cluster's own tests: a few small tools in one
// static binary (the etcd images have no shell), chosen by the first argument.
//
//	toolbox serve ADDR DIR   serve DIR over HTTP on ADDR; /healthz answers 200
//	toolbox cat FILE...      print files
//	toolbox write FILE TEXT  write TEXT to FILE
//	toolbox sleep SECONDS    sleep, exiting 0 on SIGTERM
//	toolbox exit CODE [TEXT] print TEXT (if given), then exit with CODE
//	toolbox resolve NAME     print NAME's addresses (net.LookupHost: /etc/hosts, then DNS), one a line
//	toolbox get URL          print the body of an HTTP GET; fails unless the status is 200
//	toolbox routes           print /proc/net/route (the routes of the Pod's network namespace)
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: toolbox serve|cat|write|sleep|exit|resolve|get|routes ...")
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
		if len(args) > 1 {
			fmt.Println(args[1])
		}
		os.Exit(code)
	case "resolve":
		need(args, 1)
		resolve(args[0])
	case "get":
		need(args, 1)
		get(args[0])
	case "routes":
		data, err := os.ReadFile("/proc/net/route")
		if err != nil {
			fail(err.Error())
		}
		_, _ = os.Stdout.Write(data)
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

func resolve(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		fail(err.Error())
	}
	for _, a := range addrs {
		fmt.Println(a)
	}
}

func get(url string) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fail(err.Error())
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		fail(err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		fail(fmt.Sprintf("GET %s: %s", url, resp.Status))
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

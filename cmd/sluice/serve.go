package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

const serveUsage = "serve -m MODEL [--addr 127.0.0.1:8080] [--parallel N] [--api-key KEY] [--pipeline FILE] [--chat-template NAME|FILE] [--model-name NAME] [--max-waiting N] [--shutdown-timeout D] [--body-timeout D] [--max-conns N]"

func cmdServe(ctx context.Context, e *env, args []string) error {
	fs := e.flags("serve")
	mf := addModelFlags(fs, "m")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	parallel := fs.Int("parallel", 0, "sequences in the continuous batch at once (default: the pipeline's max_in_flight)")
	apiKey := fs.String("api-key", os.Getenv("SLUICE_API_KEY"), "API key clients must send as 'Authorization: Bearer KEY' (default: $SLUICE_API_KEY; none: open)")
	pipeline := fs.String("pipeline", "", "pipeline file (default: the greedy preset; request parameters override its sampling)")
	tmplName := fs.String("chat-template", "", "chat template: "+strings.Join(chat.Builtins(), ", ")+" or a Jinja file (default: the model's own, else one chosen by its vocabulary)")
	name := fs.String("model-name", "", "model id clients name (default: the model file's name without extension)")
	waiting := fs.Int("max-waiting", 0, "requests that may wait for the engine beyond --parallel; more get 503 (default 256)")
	grace := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long the requests accepted (running or waiting for the engine) may take to finish before they are cancelled")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "how long a request body may take to arrive once its headers have; a slower one gets 408 and its connection is closed")
	maxConns := fs.Int("max-conns", 1024, "connections held open at once; one more is answered 503 and closed")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	// SIGTERM (a service manager) and SIGINT shut down gracefully, from
	// here on: one while the model loads cancels the load.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	var p *pipelines.Pipeline
	var err error
	if *pipeline != "" {
		p, err = pipelines.Load(*pipeline)
	} else {
		p, err = pipelines.Preset("greedy")
	}
	if err != nil {
		return err
	}
	mf.apply(p)
	if *parallel > 0 {
		s, ok := p.StageOfKind(pipelines.KindScheduler)
		if !ok {
			return fmt.Errorf("--parallel: %s has no scheduler stage", p.Source)
		}
		s.Params.(*pipelines.SchedulerParams).MaxInFlight = *parallel
	}
	var tmpl *chat.Template
	if *tmplName != "" {
		if tmpl, err = chat.Load(*tmplName); err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, e, p)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeEngine(e, eng)
	id := *name
	if id == "" {
		base := filepath.Base(p.Model.Path)
		id = strings.TrimSuffix(base, filepath.Ext(base))
	}
	srv, err := server.New(server.Options{Engine: eng, Model: id, APIKey: *apiKey, Chat: tmpl, MaxWaiting: *waiting,
		BodyTimeout: *bodyTimeout, MaxConns: *maxConns, Logger: e.log})
	if err != nil {
		ln.Close()
		return err
	}
	e.log.Info().Str("addr", ln.Addr().String()).Str("model", id).Str("chat_template", srv.Template().Name).Msg("serving")
	fmt.Fprintf(e.stderr, "sluice: serving %s on http://%s (chat template %s)\n", id, ln.Addr(), srv.Template().Name)
	return srv.Serve(ctx, ln, *grace)
}

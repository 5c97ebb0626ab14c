package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	appsetcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	cmpserver "github.com/argoproj/argo-cd/v3/cmd/argocd-cmp-server/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/util/log"
)

var commands = map[string]func() *cobra.Command{
	"argocd-application-controller":    appcontroller.NewCommand,
	"argocd-applicationset-controller": appsetcontroller.NewCommand,
	"argocd-repo-server":               reposerver.NewCommand,
	"argocd-cmp-server":                cmpserver.NewCommand,
}

func main() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if _, ok := commands[name]; !ok && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: argocd argocd-application-controller|argocd-applicationset-controller|argocd-repo-server|argocd-cmp-server [flags]")
		os.Exit(2)
	}
	command := newCommand()
	command.SetArgs(args)
	if command.Execute() != nil {
		os.Exit(1)
	}
}

// inventory-consumer reads a ClusterProfile the way the inventory's
// consumers do (Kueue's MultiKueue, the Argo CD ClusterProfile syncer): the
// profile from the hub with the module's typed client, then a client-go
// config for its cluster from sigs.k8s.io/cluster-inventory-api's
// pkg/access and the consumer's provider file. tests/it/inventory.rs runs
// it against what kubefedctl published; hack/testenv.sh builds it.
//
// Output, one line per step: "namespaces N", "secrets forbidden|allowed",
// then with -pause, "paused" (it waits for a line on stdin, meanwhile the
// test makes the token invalid) and "namespaces-again N" after client-go's
// exec authenticator has fetched a fresh credential.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the hub's kubeconfig")
	hubContext := flag.String("context", "", "the hub's context")
	profile := flag.String("profile", "", "NAMESPACE/NAME of the ClusterProfile")
	providerFile := flag.String("provider-file", "", "the consumer's provider file")
	pause := flag.Bool("pause", false, "wait for a line on stdin, then list again")
	flag.Parse()
	if err := run(*kubeconfig, *hubContext, *profile, *providerFile, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "inventory-consumer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, hubContext, profile, providerFile string, pause bool) error {
	ctx := context.Background()
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: hubContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("hub config: %w", err)
	}
	ns, name, ok := strings.Cut(profile, "/")
	if !ok {
		return fmt.Errorf("-profile must be NAMESPACE/NAME")
	}
	cp, err := versioned.NewForConfigOrDie(hub).ApisV1alpha1().ClusterProfiles(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ClusterProfile %s: %w", profile, err)
	}
	providers, err := access.NewFromFile(providerFile)
	if err != nil {
		return err
	}
	cfg, err := providers.BuildConfigFromCP(cp)
	if err != nil {
		return err
	}
	member, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := member.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	fmt.Println("namespaces", len(list.Items))
	_, err = member.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		fmt.Println("secrets forbidden")
	case err == nil:
		fmt.Println("secrets allowed")
	default:
		return fmt.Errorf("listing secrets: %w", err)
	}
	if !pause {
		return nil
	}
	fmt.Println("paused")
	bufio.NewReader(os.Stdin).ReadString('\n')
	// client-go's exec authenticator drops a credential the server
	// refuses (401) and runs the plugin again for the next request.
	list, err = member.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if apierrors.IsUnauthorized(err) {
		fmt.Println("unauthorized, asking again")
		list, err = member.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return fmt.Errorf("listing namespaces again: %w", err)
	}
	fmt.Println("namespaces-again", len(list.Items))
	return nil
}

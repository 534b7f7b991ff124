// A Go agent exporting GenAI spans with the OpenTelemetry Go SDK's OTLP/HTTP exporter (otlptracehttp,
// protobuf, gzip) to blackbox's receiver: an invoke_agent span around a chat span that asks for a
// tool, the execute_tool span, and a chat span that answers (official gen_ai.* attributes, content on).
// Usage: exporter ENDPOINT_URL SERVICE_NAME
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

const system = "You are the billing assistant. Answer in one sentence."

func text(role, content string) map[string]any {
	return map[string]any{"role": role, "parts": []any{map[string]any{"type": "text", "content": content}}}
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: exporter ENDPOINT_URL SERVICE_NAME")
		os.Exit(2)
	}
	ctx := context.Background()
	exporter, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(os.Args[1]),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		panic(err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(os.Args[2]))))
	tracer := provider.Tracer("blackbox-interop-go")

	user := text("user", "How much is invoice inv_9?")
	call := map[string]any{"type": "tool_call", "id": "call_inv_9", "name": "getInvoice",
		"arguments": map[string]any{"invoiceId": "inv_9"}}
	result := `{"invoiceId":"inv_9","total":"120.00 EUR"}`
	answer := map[string]any{"role": "tool", "parts": []any{
		map[string]any{"type": "tool_call_response", "id": "call_inv_9", "response": result}}}
	chat := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "gpt-go"),
		attribute.Float64("gen_ai.request.temperature", 0.3),
		attribute.String("gen_ai.system_instructions", encode([]any{map[string]any{"type": "text", "content": system}})),
	}

	// message attributes are JSON strings, as the conventions allow where structured ones are not sent
	ctx, agent := tracer.Start(ctx, "invoke_agent billing")
	agent.SetAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"))
	_, first := tracer.Start(ctx, "chat gpt-go")
	first.SetAttributes(chat...)
	first.SetAttributes(
		attribute.String("gen_ai.input.messages", encode([]any{user})),
		attribute.String("gen_ai.output.messages", encode([]any{map[string]any{"role": "assistant", "parts": []any{call}}})),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_calls"}))
	first.End()
	_, tool := tracer.Start(ctx, "execute_tool getInvoice")
	tool.SetAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", "getInvoice"),
		attribute.String("gen_ai.tool.call.id", "call_inv_9"),
		attribute.String("gen_ai.tool.call.arguments", `{"invoiceId":"inv_9"}`),
		attribute.String("gen_ai.tool.call.result", result))
	tool.End()
	_, second := tracer.Start(ctx, "chat gpt-go")
	second.SetAttributes(chat...)
	second.SetAttributes(
		attribute.String("gen_ai.input.messages", encode([]any{user, map[string]any{"role": "assistant", "parts": []any{call}}, answer})),
		attribute.String("gen_ai.output.messages", encode([]any{text("assistant", "Invoice inv_9 totals 120.00 EUR.")})),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}))
	second.End()
	agent.End()
	if err := provider.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "export failed:", err)
		os.Exit(1)
	}
	fmt.Println("exported")
}

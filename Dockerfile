# The portal with its embedded local backend: desktops run inside the container.
FROM golang:1.26-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN bash scripts/assets.sh && CGO_ENABLED=0 go build -o /out/corral-vdi-portal ./cmd/corral-vdi-portal

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
        tigervnc-standalone-server openbox xterm x11-xserver-utils fonts-dejavu-core freerdp2-shadow-x11 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 corral
COPY --from=build /out/corral-vdi-portal /usr/local/bin/corral-vdi-portal
USER corral
ENV CORRAL_VDI_LISTEN=0.0.0.0:8080 CORRAL_VDI_AUTH=tailscale CORRAL_VDI_DATA_DIR=/home/corral/data
EXPOSE 8080
ENTRYPOINT ["corral-vdi-portal", "serve"]
